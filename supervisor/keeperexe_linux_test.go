package supervisor

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/internal/testsupport/proctest"
	"github.com/etcdlead/etcdlead/supervisor/internal/keeper"
)

// Which program is the keeper: the keeper binary when one of this
// protocol is found, else this binary re-executed. Real processes: the
// keeper binary is built from cmd/etcdlead-keeper, the fallback is this test
// binary (see TestMain).

// term is one child started through Start or a standby keeper: this test
// binary in a helper mode that prints "ready" and ends on SIGTERM.
type term struct {
	c      *Child
	out    *bufio.Reader
	keeper string // the keeper's executable, read once the child runs
	argv1  string // the keeper's argv[1]
}

func startTerm(t *testing.T, standby bool, log hclog.Logger) *term {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	spec := Spec{
		Path: os.Args[0], Argv: []string{"helper"},
		Env:        append(os.Environ(), "SUPERVISOR_TEST_CHILD=wait"),
		KillSignal: syscall.SIGTERM, KillTimeout: time.Second, FenceMargin: 100 * time.Millisecond,
		LogLevel: "error", Stdout: w,
	}
	var c *Child
	if standby {
		var p *Pending
		if p, err = Prepare(spec, log); err == nil {
			c, err = p.Start(bootclock.Now()+time.Minute, nil, log)
		}
	} else {
		spec.Deadline = bootclock.Now() + time.Minute
		c, err = Start(spec, log)
	}
	w.Close()
	if err != nil {
		t.Fatalf("start (standby %v): %v", standby, err)
	}
	t.Cleanup(func() {
		c.Kill()
		<-c.Done()
	})
	tm := &term{c: c, out: bufio.NewReader(r)}
	if line, err := tm.out.ReadString('\n'); line != "ready\n" {
		t.Fatalf("child said %q (%v), want ready", line, err)
	}
	keeper := proctest.ParentOf(t, c.Pid())
	if tm.keeper, err = os.Readlink("/proc/" + strconv.Itoa(keeper) + "/exe"); err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(keeper) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if argv := strings.Split(string(cmdline), "\x00"); len(argv) > 1 {
		tm.argv1 = argv[1]
	}
	return tm
}

// stop ends the child and checks that nothing but the child wrote to its
// stdout: no second child ran, under whatever keeper.
func (tm *term) stop(t *testing.T) {
	t.Helper()
	tm.c.Stop(syscall.SIGTERM)
	<-tm.c.Done()
	if got := tm.c.Result(); got.Reason != ReasonStopped {
		t.Errorf("result %+v, want stopped", got)
	}
	if rest, _ := tm.out.ReadString(0); rest != "signal SIGTERM\n" {
		t.Errorf("more on the children's stdout after the one child ended: %q", rest)
	}
}

// infoLog logs what etcdlead logs by default.
func infoLog() (hclog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info}), &buf
}

func debugLog() (hclog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Debug}), &buf
}

const fallbackLine = "the keeper is a re-exec of this binary"

// A keeper binary of this protocol is the keeper, on the fresh and the
// standby path, and nothing says otherwise.
func TestKeeperBinaryIsTheKeeper(t *testing.T) {
	dir := t.TempDir()
	bin := buildKeeper(t, dir)
	useKeeperDir(t, dir)
	log, logged := debugLog()
	for _, standby := range []bool{false, true} {
		tm := startTerm(t, standby, log)
		if tm.keeper != bin {
			t.Errorf("standby %v: the keeper runs %s, want %s", standby, tm.keeper, bin)
		}
		tm.stop(t)
	}
	if strings.Contains(logged.String(), fallbackLine) {
		t.Errorf("fallback logged with a keeper binary present:\n%s", logged)
	}
}

// No usable keeper binary: this binary is the keeper, in its hidden mode,
// and one line per process, at info level, says where it looked and why.
func TestKeeperFallbackWithoutBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, why string
		setup     func(dir string)
	}{
		{"absent", "no such file", func(string) {}},
		{"not executable", "not an executable file", func(dir string) {
			if err := os.WriteFile(filepath.Join(dir, KeeperName), []byte("#!/bin/sh\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.setup(dir)
			useKeeperDir(t, dir)
			log, logged := infoLog()
			for _, standby := range []bool{true, false, true} {
				tm := startTerm(t, standby, log)
				if tm.keeper != self || tm.argv1 != KeeperArg {
					t.Errorf("standby %v: the keeper runs %s with argv[1] %q, want %s %s", standby, tm.keeper, tm.argv1, self, KeeperArg)
				}
				tm.stop(t)
			}
			looked := "looked_for=" + filepath.Join(dir, KeeperName)
			if n := strings.Count(logged.String(), fallbackLine); n != 1 || !strings.Contains(logged.String(), c.why) ||
				!strings.Contains(logged.String(), "[INFO]") || !strings.Contains(logged.String(), looked) {
				t.Errorf("want one info line saying %q and %s, got:\n%s", c.why, looked, logged)
			}
		})
	}
}

// A keeper binary of another protocol refuses before it reads its pipe, so
// it never starts a child; the supervisor starts the term's child under the
// fallback instead, and under the fallback from then on.
func TestKeeperOfAnotherProtocol(t *testing.T) {
	dir := t.TempDir()
	bin := buildKeeper(t, dir, "-ldflags=-X github.com/etcdlead/etcdlead/supervisor/internal/keeper.keeperProtocol=0-test")

	t.Run("refuses", func(t *testing.T) {
		ctrlR, ctrlW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer ctrlW.Close()
		statR, statW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		marker := filepath.Join(t.TempDir(), "ran")
		cmd := exec.Command(bin, keeper.ProtocolArg(), "-path", "/bin/sh", "-signal", "15", "-kill-timeout", "1s",
			"-fence-margin", "100ms", "-log-level", "debug", "--", "sh", "-c", "touch "+marker)
		cmd.ExtraFiles = []*os.File{ctrlR, statW}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		// The start is waiting before the keeper runs, as on the fresh path.
		if _, err := ctrlW.WriteString(keeper.Command{Op: keeper.OpStart}.String()); err != nil {
			t.Fatal(err)
		}
		err = cmd.Start()
		ctrlR.Close()
		statW.Close()
		if err != nil {
			t.Fatal(err)
		}
		said, _ := bufio.NewReader(statR).ReadString(0)
		statR.Close()
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitcode.Failure {
			t.Errorf("keeper of another protocol: %v, want exit %d", err, exitcode.Failure)
		}
		if said != "keeper 0-test\n" {
			t.Errorf("keeper said %q, want only its protocol", said)
		}
		if stderr.Len() != 0 {
			t.Errorf("keeper wrote to stderr: %q", stderr.String())
		}
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a child ran under the keeper of another protocol (%v)", err)
		}
	})

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, standby := range []bool{false, true} {
		t.Run("standby="+strconv.FormatBool(standby), func(t *testing.T) {
			useKeeperDir(t, dir)
			log, logged := debugLog()
			for i := 0; i < 2; i++ {
				tm := startTerm(t, standby, log)
				if tm.keeper != self || tm.argv1 != KeeperArg {
					t.Errorf("term %d: the keeper runs %s with argv[1] %q, want %s %s", i, tm.keeper, tm.argv1, self, KeeperArg)
				}
				tm.stop(t)
			}
			if n := strings.Count(logged.String(), fallbackLine); n != 1 || !strings.Contains(logged.String(), "keeper 0-test") {
				t.Errorf("want one debug line naming the other protocol, got:\n%s", logged)
			}
			if strings.Contains(logged.String(), "fresh keeper") {
				t.Errorf("a refusal taken for a dead keeper:\n%s", logged)
			}
		})
	}
}
