package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/exitcode"
)

// The test binary doubles as the keeper (argv[1] == KeeperArg, as in
// etcdlead itself) and as a helper child, chosen by $SUPERVISOR_TEST_CHILD.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == KeeperArg {
		os.Exit(RunKeeper(os.Args[2:]))
	}
	if mode := os.Getenv("SUPERVISOR_TEST_CHILD"); mode != "" {
		os.Exit(helperChild(mode))
	}
	// Race-enabled binaries sleep a second at exit by default; the keeper
	// and helper children are this binary, so skip that wait for them.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

// skipIfShort leaves a test to the full suite under go test -short: the
// fence waited out under every containment and walk, and the trees that
// fork without pause, which load both cores.
func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow: runs in the full suite (go test -race -p 1 ./...)")
	}
}

// helperChild prints "ready", then one line per signal it receives, and
// reports a grandchild's pid when asked to start one. In mode "escapees" it
// first starts two holders that ignore SIGTERM, one in a new process group
// and one in a new session, which print "held pid=N". No sleeps: tests wait
// on its lines.
func helperChild(mode string) int {
	if n, ok := strings.CutPrefix(mode, "exit:"); ok {
		code, _ := strconv.Atoi(n)
		return code
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1)
	if mode == "hold" {
		// Silent on signals: its stdout may be a pipe whose reader died.
		fmt.Printf("held pid=%d\n", os.Getpid())
		for range sigs {
		}
	}
	if mode == "escapees" && !startEscapees() {
		return 2
	}
	if mode == "churn" || mode == "churn-escape" {
		pids, ok := startChurn(churners, mode == "churn-escape")
		if !ok {
			return 2
		}
		fmt.Printf("churn %s\n", strings.Trim(fmt.Sprint(pids), "[]"))
		signal.Ignore(syscall.SIGTERM)
	}
	if mode == "grandchild" {
		self, _ := os.Executable()
		gc := exec.Command(self)
		gc.Env = append(os.Environ(), "SUPERVISOR_TEST_CHILD=ignore-term")
		out, _ := gc.StdoutPipe()
		if err := gc.Start(); err != nil {
			return 2
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if line != "ready\n" {
			return 2
		}
		fmt.Printf("grandchild %d\n", gc.Process.Pid)
	}
	fmt.Println("ready")
	for s := range sigs {
		fmt.Printf("signal %s\n", unix.SignalName(s.(syscall.Signal)))
		if s == syscall.SIGTERM && mode != "ignore-term" {
			signal.Reset(syscall.SIGTERM)
			_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		}
	}
	return 0
}

func startEscapees() bool {
	self, _ := os.Executable()
	for _, attr := range []*syscall.SysProcAttr{{Setpgid: true}, {Setsid: true}} {
		h := exec.Command(self)
		h.Env = append(os.Environ(), "SUPERVISOR_TEST_CHILD=hold")
		h.Stdout = os.Stdout
		h.SysProcAttr = attr
		if err := h.Start(); err != nil {
			return false
		}
	}
	return true
}

// churners is how many shell loops mode "churn" starts: a tree that forks
// faster than any walk of it, as the promise must hold against (issue's
// ≥ 100 descendants that ignore SIGTERM).
const churners = 100

// startChurn starts n shell loops that ignore SIGTERM and fork and exec
// without pause; with escape, every other one in a session of its own.
func startChurn(n int, escape bool) ([]int, bool) {
	// Each loop waits for the end of this pipe, so that all start at once
	// instead of each start competing with the loops already running.
	gate, open, err := os.Pipe()
	if err != nil {
		return nil, false
	}
	defer open.Close()
	defer gate.Close()
	var pids []int
	for i := range n {
		sh := exec.Command("/bin/sh", "-c", `trap '' TERM; read go; while :; do /bin/sleep 0.05; done`)
		sh.Stdin = gate
		sh.SysProcAttr = &syscall.SysProcAttr{Setsid: escape && i%2 == 1}
		if err := sh.Start(); err != nil {
			return nil, false
		}
		pids = append(pids, sh.Process.Pid)
	}
	return pids, true
}

type started struct {
	c     *Child
	lines chan string
}

func startHelper(t *testing.T, mode string, mutate func(*Spec)) *started {
	t.Helper()
	s, err := tryStartHelper(t, mode, mutate)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return s
}

// cutOff starts mode's child with its deadline window ahead and renews it,
// window ahead, until ready returns; then the deadline stands, as that of
// a term cut off from etcd, and cutOff returns it. A start slowed by a
// loaded machine thus cannot fence the child before the test knows its
// tree; a Start refused past its fence point for the same reason is tried
// again.
func cutOff(t *testing.T, mode string, window time.Duration, mutate func(*Spec), ready func(*started)) (*started, time.Duration) {
	t.Helper()
	var s *started
	for try := 1; ; try++ {
		var err error
		s, err = tryStartHelper(t, mode, func(sp *Spec) {
			if mutate != nil {
				mutate(sp)
			}
			sp.Deadline = bootclock.Now() + window
		})
		if err == nil {
			break
		}
		if !errors.Is(err, ErrPastFence) || try == 5 {
			t.Fatalf("Start: %v", err)
		}
		t.Logf("Start, try %d: %v", try, err)
	}
	var last atomic.Int64
	last.Store(int64(bootclock.Now() + window))
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(window / 10)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				d := bootclock.Now() + window
				s.c.SetDeadline(d)
				last.Store(int64(d))
			}
		}
	}()
	func() {
		defer func() { close(stop); <-stopped }()
		ready(s)
	}()
	return s, time.Duration(last.Load())
}

// tryStartHelper is startHelper with Start's error returned.
func tryStartHelper(t *testing.T, mode string, mutate func(*Spec)) (*started, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{
		Path: os.Args[0], Argv: []string{"helper"},
		Env:        append(os.Environ(), "SUPERVISOR_TEST_CHILD="+mode),
		KillSignal: syscall.SIGTERM, KillTimeout: 200 * time.Millisecond, FenceMargin: 50 * time.Millisecond,
		LogLevel: "error", Stdout: w,
	}
	if mutate != nil {
		mutate(&spec)
	}
	c, err := Start(spec, hclog.NewNullLogger())
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	if contain.Mode == ContainCgroup {
		// A test of the cgroup must not pass on the process group.
		if c.cg == "" {
			t.Fatal("the child was not started in a cgroup")
		}
		inCgroup(t, c.Pid())
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		r.Close()
	}()
	t.Cleanup(func() {
		c.Kill()
		<-c.Done()
	})
	return &started{c: c, lines: lines}, nil
}

func (s *started) expect(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("output ended before %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("no %q within the safety timeout", prefix)
		}
	}
}

func (s *started) result(t *testing.T) Result {
	t.Helper()
	select {
	case <-s.c.Done():
		return s.c.Result()
	case <-time.After(20 * time.Second):
		t.Fatal("child's group not gone within the safety timeout")
	}
	return Result{}
}

func TestChildExitCodePassesThrough(t *testing.T) {
	for _, code := range []int{0, 3, 77} {
		s := startHelper(t, "exit:"+strconv.Itoa(code), nil)
		if got := s.result(t); got != (Result{Code: code, Reason: ReasonExited}) {
			t.Errorf("exit %d: got %+v", code, got)
		}
	}
}

// Gone follows Done once the keeper is reaped and the term's cgroups are
// removed: the runner revokes the lease only then.
func TestGoneOnceTheKeeperIs(t *testing.T) {
	s := startHelper(t, "exit:0", nil)
	s.result(t)
	select {
	case <-s.c.Gone():
	case <-time.After(20 * time.Second):
		t.Fatal("keeper not gone within the safety timeout")
	}
	if pid := s.c.keeper.cmd.Process.Pid; syscall.Kill(pid, 0) != syscall.ESRCH {
		t.Errorf("keeper %d is still there (a zombie, unreaped) when Gone closed", pid)
	}
	if dir := s.c.keeper.cg.dir; dir != "" {
		if _, err := os.Stat(string(dir)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the term's cgroup %s when Gone closed: %v, want it removed", dir, err)
		}
	}
}

// A child killed by a signal is told from one that exits with the same
// code: an interactive run stops on Ctrl-C, not on a shell's exit 130.
func TestSignalDeathToldFromExitCode(t *testing.T) {
	s := startHelper(t, "exit:130", nil)
	if got := s.result(t); got != (Result{Code: 130, Reason: ReasonExited}) {
		t.Errorf("exit 130: got %+v", got)
	}
	s = startHelper(t, "", func(sp *Spec) { sp.Path, sp.Argv = "/bin/sh", []string{"sh", "-c", "kill -INT $$"} })
	if got := s.result(t); got != (Result{Code: 130, Reason: ReasonExited, Signaled: true}) {
		t.Errorf("killed by SIGINT: got %+v", got)
	}
}

func TestStopEndsChildWithItsSignalStatus(t *testing.T) {
	s := startHelper(t, "sleep", nil)
	s.expect(t, "ready")
	s.c.Stop(syscall.SIGTERM)
	s.expect(t, "signal SIGTERM")
	if got := s.result(t); got != (Result{Code: 143, Reason: ReasonStopped}) {
		t.Fatalf("got %+v, want 143 stopped", got)
	}
}

func TestSignalIsForwarded(t *testing.T) {
	s := startHelper(t, "sleep", nil)
	s.expect(t, "ready")
	s.c.Signal(syscall.SIGHUP)
	s.expect(t, "signal SIGHUP")
	s.c.Signal(syscall.SIGUSR1)
	s.expect(t, "signal SIGUSR1")
}

func TestChildIgnoringStopIsKilled(t *testing.T) {
	s := startHelper(t, "ignore-term", nil)
	s.expect(t, "ready")
	s.c.Stop(syscall.SIGTERM)
	s.expect(t, "signal SIGTERM")
	if got := s.result(t); got != (Result{Code: 137, Reason: ReasonStopped}) {
		t.Fatalf("got %+v, want 137 stopped", got)
	}
}

// The group, not just the child, is stopped, and the result comes only once
// the grandchild (which ignores SIGTERM) is gone too.
func TestGrandchildDiesWithGroup(t *testing.T) {
	s := startHelper(t, "grandchild", nil)
	line := s.expect(t, "grandchild ")
	gpid, _ := strconv.Atoi(strings.TrimPrefix(line, "grandchild "))
	s.expect(t, "ready")
	s.c.Stop(syscall.SIGTERM)
	s.result(t)
	if err := syscall.Kill(gpid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("grandchild %d still exists after the result: kill(0) = %v", gpid, err)
	}
}

// With no renewals the keeper fences on its own: a deadline 600ms ahead
// must stop the child with no word from the supervisor.
func TestFenceStopsChildWithoutSupervisor(t *testing.T) {
	// SIGTERM at deadline-K-m, SIGKILL at deadline-m: the child must be
	// gone, and reported, before the deadline itself.
	s, deadline := cutOff(t, "ignore-term", 1200*time.Millisecond,
		func(sp *Spec) { sp.FenceMargin = 300 * time.Millisecond },
		func(s *started) { s.expect(t, "ready") })
	s.expect(t, "signal SIGTERM")
	got := s.result(t)
	if got != (Result{Code: 137, Reason: ReasonFenced}) {
		t.Fatalf("got %+v, want 137 fenced", got)
	}
	if late := bootclock.Now() - deadline; late >= 0 {
		t.Fatalf("the fenced child was reported gone %s after the deadline: the lease may have ended under it", late)
	}
}

// The supervisor's end of the pipe closing (its death) stops the group.
func TestOrphanedChildIsStopped(t *testing.T) {
	s := startHelper(t, "sleep", nil)
	s.expect(t, "ready")
	s.c.mu.Lock()
	s.c.ctrl.Close()
	s.c.ctrl = nil
	s.c.mu.Unlock()
	s.expect(t, "signal SIGTERM")
	if got := s.result(t); got != (Result{Code: 143, Reason: ReasonOrphaned}) {
		t.Fatalf("got %+v, want 143 orphaned", got)
	}
}

// A standby keeper starts the child only on Start, with the term's
// variables, and a cancelled one leaves no child behind.
func TestStandbyKeeper(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Path: "/bin/sh", Argv: []string{"sh", "-c", "echo rev=$ETCDLEAD_REV"}, Env: os.Environ(),
		KillSignal: syscall.SIGTERM, KillTimeout: time.Second, FenceMargin: 100 * time.Millisecond, LogLevel: "error", Stdout: w}
	p, err := Prepare(spec, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Start(bootclock.Now()+time.Minute, []string{"ETCDLEAD_REV=42"}, hclog.NewNullLogger())
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(r).ReadString('\n')
	if line != "rev=42\n" {
		t.Fatalf("child printed %q, want rev=42", line)
	}
	<-c.Done()
	if got := c.Result(); got != (Result{Code: 0, Reason: ReasonExited}) {
		t.Fatalf("result %+v", got)
	}
	// A cancelled standby keeper starts nothing: its stdout closes with no
	// line from a child.
	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	spec.Stdout = w2
	q, err := Prepare(spec, hclog.NewNullLogger())
	w2.Close()
	if err != nil {
		t.Fatal(err)
	}
	q.Cancel() // returns once the keeper has exited
	if out, err := io.ReadAll(r2); err != nil || len(out) != 0 {
		t.Fatalf("a cancelled standby keeper's stdout said %q (%v), want nothing", out, err)
	}
}

func TestExecFailures(t *testing.T) {
	for _, c := range []struct {
		path string
		code int
	}{
		{"/nonexistent/command", exitcode.NotFound},
		{t.TempDir(), exitcode.CannotExec},
	} {
		_, err := Start(Spec{Path: c.path, Argv: []string{c.path}, KillSignal: syscall.SIGTERM,
			KillTimeout: time.Second, FenceMargin: time.Second, LogLevel: "error"}, hclog.NewNullLogger())
		var ee *ExecError
		if !errors.As(err, &ee) || ee.Code != c.code {
			t.Errorf("Start(%s) = %v, want ExecError %d", c.path, err, c.code)
		}
	}
}
