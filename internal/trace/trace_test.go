//go:build etcdlead_trace

package trace

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// helperVar makes the test binary a helper process that writes marks: the
// package reads its variable at initialisation, so tracing on or off is
// only tested in processes started with it set or not.
const helperVar = "TRACE_TEST_HELPER"

// helperMarks is enough marks that two helpers' writes overlap in time.
const helperMarks = 3000

func TestMain(m *testing.M) {
	if os.Getenv(helperVar) != "" {
		os.Exit(helper())
	}
	os.Exit(m.Run())
}

// helper logs through a hooked logger whose level hides every line, as a
// run at its default level hides the trace-level steps: the hook must
// stamp them all the same, and a derived (named) logger's too.
func helper() int {
	l := Hook(hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Error}))
	named := l.Named("sub")
	for i := range helperMarks {
		l.Trace("helper plain")
		named.Debug("helper counted with a longer message " + strconv.Itoa(i))
	}
	return 0
}

func runHelpers(t *testing.T, n int, dir string, env ...string) {
	t.Helper()
	var cmds []*exec.Cmd
	for range n {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Dir = dir
		cmd.Env = append(withoutVar(os.Environ()), append([]string{helperVar + "=1"}, env...)...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
}

func withoutVar(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, Var+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func TestOffWritesNothing(t *testing.T) {
	for _, env := range [][]string{nil, {Var + "="}} {
		dir := t.TempDir()
		runHelpers(t, 1, dir, env...)
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 0 {
			t.Errorf("with %q a helper left %d files in its directory", env, len(ents))
		}
	}
}

// TestOnInterleavesWholeLines has two processes mark into one file at once:
// every line must be whole, and each process's lines in its own order.
func TestOnInterleavesWholeLines(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "trace")
	runHelpers(t, 2, dir, Var+"="+file)
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type state struct {
		lines int
		next  int64 // the counted mark expected next
		last  int64 // the last time stamp
	}
	pids := map[string]*state{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fields := strings.SplitN(sc.Text(), " ", 3)
		if len(fields) < 3 {
			t.Fatalf("line %d is not whole: %q", n, sc.Text())
		}
		ts, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			t.Fatalf("line %d: time %q: %v", n, fields[0], err)
		}
		s := pids[fields[1]]
		if s == nil {
			s = &state{}
			pids[fields[1]] = s
		}
		if ts < s.last {
			t.Fatalf("line %d: time goes back within pid %s", n, fields[1])
		}
		s.last = ts
		s.lines++
		switch {
		case fields[2] == "helper plain":
		case fields[2] == "helper counted with a longer message "+strconv.FormatInt(s.next, 10):
			s.next++
		default:
			t.Fatalf("line %d is not a whole mark in its order: %q", n, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(pids) != 2 {
		t.Fatalf("marks from %d processes, want 2", len(pids))
	}
	for pid, s := range pids {
		if s.lines != 2*helperMarks {
			t.Errorf("pid %s wrote %d lines, want %d", pid, s.lines, 2*helperMarks)
		}
	}
}
