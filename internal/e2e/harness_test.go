package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/testsupport/proctest"
	"github.com/etcdlead/etcdlead/supervisor"
)

// safety bounds every wait on an event; it is never what a test measures.
const safety = 60 * time.Second

// binDir holds the etcdlead binary, its keeper binary beside it (as
// installed, so etcdlead finds it there) and the probe child, built once per
// test run. etcdlead and its keeper are built with the race detector when
// the tests are (go test -race), so that the concurrent core (the
// campaign's renewals, watches and waits, the keeper, the monitor) runs
// under it end to end too.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "etcdlead-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for out, pkg := range map[string]string{
		"etcdlead":            "github.com/etcdlead/etcdlead",
		supervisor.KeeperName: "github.com/etcdlead/etcdlead/cmd/etcdlead-keeper",
		"probe":               "github.com/etcdlead/etcdlead/testdata/probe",
	} {
		// Built as the archives and packages are (README.md, "Install").
		args := []string{"build", "-tags", "urfave_cli_no_docs", "-o", filepath.Join(dir, out)}
		if raceEnabled && out != "probe" {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, pkg)...)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n", pkg, err)
			return 1
		}
	}
	binDir = dir
	return m.Run()
}

// skipIfShort leaves a test to the full suite under go test -short. The
// short loop keeps a few runs of the binary against etcd (a handoff among
// three candidates, kill -9 of the leader, the README's cron line) and the
// checks that need no etcd; the faults, soaks, sweeps and the release, most
// of this package's time, run in the full suite only.
func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow: runs in the full suite (go test -race -p 1 ./...)")
	}
}

func etcdleadBin() string { return filepath.Join(binDir, "etcdlead") }
func probeBin() string    { return filepath.Join(binDir, "probe") }

// lines collects a stream's lines and lets tests wait for one.
type lines struct {
	mu      sync.Mutex
	all     []string
	at      []time.Time // when each line arrived
	changed chan struct{}
	closed  bool
	gate    chan struct{} // closed while the stream is read
}

// wait waits until the stream may be read: a paused reader leaves the
// writer's pipe to fill up, as a hung log shipper would.
func (l *lines) wait() {
	l.mu.Lock()
	g := l.gate
	l.mu.Unlock()
	<-g
}

// pause stops reading the stream after the line being read; resume goes on.
func (l *lines) pause() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gate = make(chan struct{})
}

func (l *lines) resume() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.gate:
	default:
		close(l.gate)
	}
}

func newLines(r io.Reader) *lines {
	l := &lines{changed: make(chan struct{}), gate: make(chan struct{})}
	close(l.gate)
	go func() {
		sc := bufio.NewScanner(r)
		for l.wait(); sc.Scan(); l.wait() {
			l.add(sc.Text(), false)
		}
		l.add("", true)
		if c, ok := r.(io.Closer); ok {
			c.Close()
		}
	}()
	return l
}

func (l *lines) add(s string, eof bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if eof {
		l.closed = true
	} else {
		l.all = append(l.all, s)
		l.at = append(l.at, time.Now())
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *lines) snapshot() ([]string, bool, chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.all...), l.closed, l.changed
}

// find returns the first line containing substr, if any yet.
func (l *lines) find(substr string) (string, bool) { return l.findFrom(substr, 0) }

// findFrom is find among the lines from index from (see mark) on.
func (l *lines) findFrom(substr string, from int) (string, bool) {
	all, _, _ := l.snapshot()
	for _, s := range all[min(from, len(all)):] {
		if strings.Contains(s, substr) {
			return s, true
		}
	}
	return "", false
}

// stamped is a line and when it arrived.
type stamped struct {
	text string
	at   time.Time
}

// matching returns every line containing substr, with its arrival time.
func (l *lines) matching(substr string) []stamped {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []stamped
	for i, s := range l.all {
		if strings.Contains(s, substr) {
			out = append(out, stamped{s, l.at[i]})
		}
	}
	return out
}

func (l *lines) count(substr string) int {
	all, _, _ := l.snapshot()
	n := 0
	for _, s := range all {
		if strings.Contains(s, substr) {
			n++
		}
	}
	return n
}

// waitFor blocks until a line containing substr appears (at index >= from),
// and returns it with its index.
func (l *lines) waitFor(t *testing.T, what, substr string, from int) (string, int) {
	t.Helper()
	timeout := time.After(safety)
	for {
		all, closed, changed := l.snapshot()
		for i := from; i < len(all); i++ {
			if strings.Contains(all[i], substr) {
				return all[i], i
			}
		}
		if closed {
			t.Fatalf("%s ended without a line containing %q; it said:\n%s", what, substr, strings.Join(all, "\n"))
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%s: no line containing %q within %s; it said:\n%s", what, substr, safety, strings.Join(all, "\n"))
		}
	}
}

// mark is the number of lines so far: waitFor(..., l.mark()) then sees
// only lines that arrive after this point.
func (l *lines) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

// stoppedBySupervisor waits for the child's end and fails unless the
// supervisor stopped it (reason=stopped): the fence, a backstop, would say
// reason=fenced, and a test of a prompt stop must not pass on the fence.
func (c *candidate) stoppedBySupervisor(t *testing.T) {
	t.Helper()
	line, _ := c.log.waitFor(t, c.name, "child exited", 0)
	if !strings.Contains(line, "reason=stopped") {
		t.Errorf("%s: the supervisor did not stop its child: %q", c.name, line)
	}
}

func (l *lines) String() string {
	all, _, _ := l.snapshot()
	return strings.Join(all, "\n")
}

// candidate is one etcdlead process.
type candidate struct {
	name string
	cmd  *exec.Cmd
	out  *lines // the child's stdout, passed through
	log  *lines // etcdlead's and the keeper's stderr
	done chan struct{}
	code int
}

// env is what every candidate of one test shares.
type env struct {
	t         *testing.T
	endpoints []string
	prefix    string
	lock      string
	journal   string
}

func newEnv(t *testing.T, endpoints []string) *env {
	dir := t.TempDir()
	return &env{
		t: t, endpoints: endpoints,
		prefix:  "test/" + strings.ReplaceAll(t.Name(), "/", "_") + "/",
		lock:    filepath.Join(dir, "lock"),
		journal: filepath.Join(dir, "journal"),
	}
}

// via returns a copy of e whose candidates use other endpoints (a proxy):
// same prefix, lock and journal.
func (e *env) via(endpoints ...string) *env {
	c := *e
	c.endpoints = endpoints
	return &c
}

func (e *env) probe(extra ...string) []string {
	return append([]string{probeBin(), "-lock", e.lock, "-journal", e.journal}, extra...)
}

// start runs `etcdlead run <flags> -- <command>` with this env's endpoints and
// prefix.
func (e *env) start(name string, flags []string, command []string, extraEnv ...string) *candidate {
	e.t.Helper()
	return e.startBin(etcdleadBin(), name, flags, command, extraEnv...)
}

// startBin is start with another etcdlead binary.
func (e *env) startBin(bin, name string, flags []string, command []string, extraEnv ...string) *candidate {
	e.t.Helper()
	args := append([]string{"run", "--endpoints=" + strings.Join(e.endpoints, ","), "--prefix=" + e.prefix, "--id=" + name}, flags...)
	args = append(append(args, "--"), command...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	return e.launch(name, cmd)
}

// launch starts cmd, an etcdlead command, as the candidate name: its
// stdout and stderr read as they come, its exit code kept, and it killed
// and its output shown at the test's end if need be.
func (e *env) launch(name string, cmd *exec.Cmd) *candidate {
	e.t.Helper()
	// Plain pipes rather than StdoutPipe: Wait would close those when
	// etcdlead exits, but the keeper, which outlives a killed etcdlead,
	// writes to them too, and the test must read what it says.
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		e.t.Fatal(err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = stdoutW, stderrW
	// A test binary that dies (a timeout, a kill) takes its candidates with
	// it; their keepers then stop the probes.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	c := &candidate{name: name, cmd: cmd, out: newLines(stdoutR), log: newLines(stderrR), done: make(chan struct{})}
	err = cmd.Start()
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		e.t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		c.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			c.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				c.code = 128 + int(ws.Signal())
			}
		}
		close(c.done)
	}()
	e.t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-c.done
		}
		if _, ok := c.log.find("WARNING: DATA RACE"); ok {
			e.t.Errorf("%s: the race detector found a data race in etcdlead", name)
		}
		c.removeLeftCgroup(e.t)
		if e.t.Failed() {
			e.t.Logf("%s stdout:\n%s\n%s stderr:\n%s", name, c.out, name, c.log)
		}
	})
	return c
}

// removeLeftCgroup removes what a candidate killed with -9 left of its
// cgroup, which only a next etcdlead started beside it would clean up.
func (c *candidate) removeLeftCgroup(t *testing.T) {
	line, ok := c.log.find(" cgroup=/")
	if !ok {
		return
	}
	dir := strings.Fields(line[strings.Index(line, " cgroup=/")+len(" cgroup="):])[0]
	if _, err := os.Stat(dir); err == nil {
		proctest.RemoveCgroup(t, dir)
	}
}

// leaderAndWaiter starts c1, running e.probe(probeFlags...), until its
// child is ready, then c2 until it waits behind c1.
func (e *env) leaderAndWaiter(flags []string, probeFlags ...string) (c1, c2 *candidate) {
	e.t.Helper()
	c1 = e.start("c1", flags, e.probe(probeFlags...))
	c1.out.waitFor(e.t, "c1", "ready", 0)
	c2 = e.start("c2", flags, e.probe())
	c2.log.waitFor(e.t, "c2", "waiting on predecessor", 0)
	return c1, c2
}

// jobRuns counts the children that started, from the probe's journal.
func (e *env) jobRuns(t *testing.T) int {
	t.Helper()
	n := 0
	for _, l := range e.journalLines(t) {
		if strings.HasPrefix(l, "start ") {
			n++
		}
	}
	return n
}

// signalLive is signal for a candidate that may have ended since it was
// picked (a soak's child that found the lock held ends its candidate):
// false, and nothing sent, if it had. Whoever picked it judges its end.
func (c *candidate) signalLive(t *testing.T, sig syscall.Signal) bool {
	t.Helper()
	if !c.running() {
		return false
	}
	if err := c.cmd.Process.Signal(sig); errors.Is(err, os.ErrProcessDone) {
		return false
	} else if err != nil {
		t.Fatalf("signal %s: %v", c.name, err)
	}
	for deadline := time.Now().Add(safety); sig == syscall.SIGSTOP && !proctest.Stopped(c.cmd.Process.Pid); time.Sleep(time.Millisecond) {
		if !c.running() {
			return false
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not stopped %v after SIGSTOP", c.name, safety)
		}
	}
	return true
}

func (c *candidate) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s: %v", c.name, err)
	}
	if sig == syscall.SIGSTOP {
		// A test freezes a supervisor to act on it frozen: the stop must
		// have reached every thread, or the supervisor may still see what
		// the test does next.
		c.waitStopped(t)
	}
}

// waitStopped waits until every thread of the candidate is stopped. There
// is no event for a group stop to wait on but /proc itself.
func (c *candidate) waitStopped(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(safety)
	for !proctest.Stopped(c.cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not stopped %v after SIGSTOP", c.name, safety)
		}
		time.Sleep(time.Millisecond)
	}
}

// stop sends SIGTERM unless the candidate has ended and been reaped
// already; asking whether it runs first would race its end.
func (c *candidate) stop(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("signal %s: %v", c.name, err)
	}
}

// exit waits for the candidate to end and returns its exit code.
func (c *candidate) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-c.done:
		return c.code
	case <-time.After(safety):
		t.Fatalf("%s did not exit within %s", c.name, safety)
	}
	return 0
}

func (c *candidate) running() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// waitGone waits, through a pidfd, until process pid has exited.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	waitGoneBy(t, pid, time.Now().Add(safety))
}

// waitGoneBy waits until process pid has exited, and fails if it still
// runs at by: a bound that the behaviour under test must meet and a
// backstop would not.
func waitGoneBy(t *testing.T, pid int, by time.Time) {
	t.Helper()
	if ok, err := proctest.GoneBy(pid, by); !ok {
		t.Fatalf("process %d still runs at %s (%v)", pid, by.Format(time.StampMilli), err)
	}
}

// journalLines returns the probe journal's lines; an OVERLAP line fails the test.
func (e *env) journalLines(t *testing.T) []string {
	t.Helper()
	ls, raw := e.journalRead(t)
	for _, l := range ls {
		if strings.HasPrefix(l, "OVERLAP") || strings.HasPrefix(l, "ERROR") {
			t.Errorf("two children at once: journal says %q\n%s", l, raw)
		}
	}
	return ls
}

// journalRead returns the probe journal's lines, and the whole of it.
func (e *env) journalRead(t *testing.T) ([]string, string) {
	t.Helper()
	b, err := os.ReadFile(e.journal)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n"), string(b)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(cancel)
	return ctx
}

func clientPrefix() clientv3.OpOption { return clientv3.WithPrefix() }
