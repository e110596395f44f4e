package supervisor

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/internal/testsupport/proctest"
	"github.com/etcdlead/etcdlead/supervisor/internal/keeper"
	"github.com/etcdlead/etcdlead/supervisor/internal/proctree"
)

// The keeper's reach: a stderr that does not drain, descendants that leave
// the child's group, keepers that die, a fence point already passed. The
// helpers read /proc on their own, apart from the code under test.

// The keeper is this test binary too (see TestMain): a test that forces the
// parent-pid scan in the keeper sets this variable in its environment.
func init() {
	if os.Getenv("SUPERVISOR_TEST_STAT_SCAN") != "" {
		proctree.StatScan.Store(true)
	}
}

// drainer reads a pipe to its end, once, whoever asks first.
type drainer struct {
	once sync.Once
	r    *os.File
	buf  bytes.Buffer
	done chan struct{}
}

func (d *drainer) start() {
	d.once.Do(func() {
		go func() {
			_, _ = io.Copy(&d.buf, d.r)
			d.r.Close()
			close(d.done)
		}()
	})
}

// exitsBy waits until process pid has exited (a zombie counts), or until
// boot-clock time at.
func exitsBy(t *testing.T, pid int, at time.Duration) bool {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true
	}
	if err != nil {
		t.Fatalf("pidfd_open(%d): %v", pid, err)
	}
	defer unix.Close(fd)
	for {
		ms := max(int((at-bootclock.Now())/time.Millisecond), 0)
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
		if err != unix.EINTR { // a child of this process stopping interrupts it
			return err == nil && n == 1
		}
	}
}

// holders waits for the helper's "ready" and the two "held pid=N" lines
// of mode "escapees", in whatever order, and returns the holders' pids.
func (s *started) holders(t *testing.T) []int {
	t.Helper()
	var pids []int
	ready := false
	timeout := time.After(20 * time.Second)
	for !ready || len(pids) < 2 {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("output ended before the holders and ready (have %v)", pids)
			}
			if p, ok := strings.CutPrefix(l, "held pid="); ok {
				pid, _ := strconv.Atoi(p)
				pids = append(pids, pid)
				proctest.KillAtCleanup(t, pid)
			}
			ready = ready || l == "ready"
		case <-timeout:
			t.Fatalf("no holders and ready within the safety timeout (have %v)", pids)
		}
	}
	return pids
}

func checkGone(t *testing.T, what string, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		if !proctest.Gone(pid) {
			t.Errorf("%s %d still exists after the keeper's report", what, pid)
		}
	}
}

// eachWalk runs f with the process tree read from the children files, then
// from the parent-pid scan that stands in where those files are missing
// (env goes to the keeper; this process, the supervisor, scans too).
func eachWalk(t *testing.T, f func(t *testing.T, env []string)) {
	t.Run("children-files", func(t *testing.T) { f(t, nil) })
	t.Run("stat-scan", func(t *testing.T) {
		proctree.StatScan.Store(true)
		t.Cleanup(func() { proctree.StatScan.Store(false) })
		f(t, []string{"SUPERVISOR_TEST_STAT_SCAN=1"})
	})
}

// eachContainment runs f with the child contained by its process group and
// the walk of the tree, then by a cgroup of its own (which needs root and a
// writable cgroup v2 hierarchy: under CI, where both are given, their
// absence fails the test).
func eachContainment(t *testing.T, f func(t *testing.T)) {
	t.Run("process-group", f)
	t.Run("cgroup", func(t *testing.T) {
		useCgroups(t)
		f(t)
	})
}

func useCgroups(t testing.TB) {
	t.Helper()
	needCgroups(t)
	c, err := Contain(ContainCgroup, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ReleaseContainment()
		if _, err := os.Stat(c.Dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("this process's cgroup %s is left behind (%v)", c.Dir, err)
		}
		contain.Lock()
		contain.Containment = Containment{}
		contain.Unlock()
	})
}

// needCgroups returns the directory this process makes its cgroups in. It
// skips the test where there is none, but fails it under CI, which runs as
// root where cgroups can be had.
func needCgroups(t testing.TB) string {
	t.Helper()
	base, err := cgroupBase()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cgroup containment unavailable under CI: %v", err)
		}
		t.Skipf("cgroup containment unavailable: %v", err)
	}
	return base
}

// inCgroup fails unless pid runs in a cgroup below this process's.
func inCgroup(t *testing.T, pid int) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "/"+filepath.Base(contain.Dir)+"/") {
		t.Fatalf("process %d is not in a cgroup below %s: %q", pid, contain.Dir, b)
	}
}

// A stderr that nobody reads, full to the brim: the fence still stops the
// child by its SIGKILL point, and the log line that says so arrives once
// stderr is drained.
func TestFenceNotHeldUpByBlockedStderr(t *testing.T) {
	r, w := proctest.Full(t)
	d := &drainer{r: r, done: make(chan struct{})}
	t.Cleanup(d.start) // a keeper stuck on stderr would never end otherwise
	f := Fence{KillTimeout: time.Second, Margin: 100 * time.Millisecond}
	s, deadline := cutOff(t, "sleep", 2*time.Second, func(sp *Spec) {
		sp.Stderr, sp.LogLevel = w, "info"
		sp.KillTimeout, sp.FenceMargin = f.KillTimeout, f.Margin
	}, func(s *started) { s.expect(t, "ready") })
	w.Close()
	f.Deadline = deadline
	if !exitsBy(t, s.c.Pid(), f.KillAt()) {
		t.Fatalf("child %d still runs at its SIGKILL point: the fence waits on a log write", s.c.Pid())
	}
	d.start()
	if got := s.result(t); got != (Result{Code: 143, Reason: ReasonFenced}) {
		t.Fatalf("got %+v, want 143 fenced", got)
	}
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		t.Fatal("stderr not closed within the safety timeout: the keeper lives on")
	}
	if out := d.buf.String(); !strings.Contains(out, "fence: lease deadline near") {
		t.Fatalf("the fence's log line never came out; stderr ended with:\n%q", out[max(len(out)-2000, 0):])
	}
}

// A stop reaches descendants in another process group and another session,
// and the report comes only once they are gone.
func TestStopReachesEveryDescendant(t *testing.T) {
	eachContainment(t, func(t *testing.T) {
		eachWalk(t, func(t *testing.T, env []string) {
			s := startHelper(t, "escapees", func(sp *Spec) { sp.Env = append(sp.Env, env...) })
			holders := s.holders(t)
			s.c.Stop(syscall.SIGTERM)
			if got := s.result(t); got != (Result{Code: 143, Reason: ReasonStopped}) {
				t.Fatalf("got %+v, want 143 stopped", got)
			}
			checkGone(t, "holder", holders...)
		})
	})
}

// timeout(1) puts itself in a process group of its own, and its command
// with it.
func TestStopReachesTimeoutAndItsCommand(t *testing.T) {
	if _, err := exec.LookPath("timeout"); err != nil {
		t.Skip("no timeout(1)")
	}
	s := startHelper(t, "", func(sp *Spec) {
		sp.Path = "/bin/sh"
		sp.Argv = []string{"sh", "-c", `timeout 60 sh -c 'echo sleep $$; exec sleep 60' & echo timeout $!; wait`}
	})
	tpid, _ := strconv.Atoi(strings.TrimPrefix(s.expect(t, "timeout "), "timeout "))
	spid, _ := strconv.Atoi(strings.TrimPrefix(s.expect(t, "sleep "), "sleep "))
	proctest.KillAtCleanup(t, tpid, spid)
	s.c.Stop(syscall.SIGTERM)
	s.result(t)
	checkGone(t, "timeout", tpid)
	checkGone(t, "its sleep", spid)
}

// The fence, with no word from the supervisor, reaches them too.
func TestFenceReachesEveryDescendant(t *testing.T) {
	skipIfShort(t)
	eachContainment(t, func(t *testing.T) {
		eachWalk(t, func(t *testing.T, env []string) {
			var holders []int
			s, _ := cutOff(t, "escapees", 2*time.Second,
				func(sp *Spec) { sp.Env = append(sp.Env, env...) },
				func(s *started) { holders = s.holders(t) })
			if got := s.result(t); got != (Result{Code: 143, Reason: ReasonFenced}) {
				t.Fatalf("got %+v, want 143 fenced", got)
			}
			checkGone(t, "holder", holders...)
		})
	})
}

// The supervisor's death (its pipe closes) reaches them too.
func TestOrphanedStopReachesEveryDescendant(t *testing.T) {
	eachContainment(t, func(t *testing.T) {
		eachWalk(t, func(t *testing.T, env []string) {
			s := startHelper(t, "escapees", func(sp *Spec) { sp.Env = append(sp.Env, env...) })
			holders := s.holders(t)
			s.c.mu.Lock()
			s.c.ctrl.Close()
			s.c.ctrl = nil
			s.c.mu.Unlock()
			if got := s.result(t); got != (Result{Code: 143, Reason: ReasonOrphaned}) {
				t.Fatalf("got %+v, want 143 orphaned", got)
			}
			checkGone(t, "holder", holders...)
		})
	})
}

// A keeper SIGKILLed while its child runs: the supervisor kills the group
// and what the keeper left, and publishes the result only once they are
// gone. No fence and a long kill timeout: nothing else would kill them.
func TestKeeperKilledLeavesNoDescendant(t *testing.T) {
	eachContainment(t, func(t *testing.T) {
		eachWalk(t, func(t *testing.T, env []string) {
			s := startHelper(t, "escapees", func(sp *Spec) {
				sp.Env = append(sp.Env, env...)
				sp.KillTimeout = time.Hour
			})
			holders := s.holders(t)
			keeper := proctest.ParentOf(t, s.c.Pid())
			if err := syscall.Kill(keeper, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if got := s.result(t); got != (Result{Code: 137, Reason: ReasonKeeperLost}) {
				t.Fatalf("got %+v, want 137 keeper-lost", got)
			}
			checkGone(t, "child", s.c.Pid())
			checkGone(t, "holder", holders...)
		})
	})
}

func standbySpec(t *testing.T, script string) (Spec, *os.File) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return Spec{Path: "/bin/sh", Argv: []string{"sh", "-c", script}, Env: os.Environ(),
		KillSignal: syscall.SIGTERM, KillTimeout: time.Second, FenceMargin: 100 * time.Millisecond,
		LogLevel: "error", Stdout: w}, r
}

// A standby keeper that died before its term is replaced by a fresh one:
// the term starts its child, with the term's variables.
func TestStandbyKeeperKilledIsReplaced(t *testing.T) {
	spec, out := standbySpec(t, "echo rev=$ETCDLEAD_REV")
	p, err := Prepare(spec, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	pid := p.k.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !exitsBy(t, pid, bootclock.Now()+20*time.Second) {
		t.Fatal("standby keeper still runs after SIGKILL")
	}
	var logged bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logged, Level: hclog.Info})
	c, err := p.Start(bootclock.Now()+time.Minute, []string{"ETCDLEAD_REV=42"}, log)
	spec.Stdout.Close()
	if err != nil {
		t.Fatalf("Start on a dead standby keeper: %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("child not done within the safety timeout")
	}
	if got := c.Result(); got != (Result{Code: 0, Reason: ReasonExited}) {
		t.Fatalf("result %+v", got)
	}
	if b, _ := io.ReadAll(out); string(b) != "rev=42\n" {
		t.Fatalf("child printed %q, want rev=42", b)
	}
	if n := strings.Count(logged.String(), "starting the child under a fresh keeper"); n != 1 {
		t.Fatalf("want one log line about the lost standby keeper, got:\n%s", logged.String())
	}
}

// A deadline still ahead, but its fence point passed: the keeper refuses
// to start the child, on the fresh and on the standby path, and is gone
// when Start returns (its stdout, shared with a child, is at its end).
func TestPastFenceRefused(t *testing.T) {
	for _, standby := range []bool{false, true} {
		t.Run("standby="+strconv.FormatBool(standby), func(t *testing.T) {
			spec, out := standbySpec(t, "echo started")
			deadline := bootclock.Now() + spec.KillTimeout/2
			var c *Child
			var err error
			if standby {
				var p *Pending
				if p, err = Prepare(spec, hclog.NewNullLogger()); err != nil {
					t.Fatal(err)
				}
				c, err = p.Start(deadline, nil, hclog.NewNullLogger())
			} else {
				spec.Deadline = deadline
				c, err = Start(spec, hclog.NewNullLogger())
			}
			spec.Stdout.Close()
			if c != nil {
				c.Kill()
				select {
				case <-c.Done():
				case <-time.After(20 * time.Second):
				}
			}
			if !errors.Is(err, ErrPastFence) {
				t.Fatalf("Start past the fence point: child %v, error %v; want ErrPastFence", c != nil, err)
			}
			if b, _ := io.ReadAll(out); len(b) != 0 {
				t.Fatalf("a child ran: it printed %q", b)
			}
		})
	}
}

// K and m are decided on the supervisor's side alone: a keeper not given a
// positive kill timeout, fence margin or signal refuses to start rather
// than fence on values of its own.
func TestKeeperRefusesWithoutFenceValues(t *testing.T) {
	full := map[string]string{"-path": "/bin/true", "-signal": "15", "-kill-timeout": "1s", "-fence-margin": "100ms"}
	for _, c := range []struct {
		flag, value string // left out when value is ""
		want        string
	}{
		{"-kill-timeout", "", "no positive -kill-timeout"},
		{"-kill-timeout", "0s", "no positive -kill-timeout"},
		{"-kill-timeout", "-1s", "no positive -kill-timeout"},
		{"-fence-margin", "", "no positive -fence-margin"},
		{"-fence-margin", "0s", "no positive -fence-margin"},
		{"-signal", "", "no positive -signal"},
	} {
		args := []string{KeeperArg, keeper.ProtocolArg()}
		for _, f := range []string{"-path", "-signal", "-kill-timeout", "-fence-margin"} {
			v := full[f]
			if f == c.flag {
				v = c.value
			}
			if v != "" {
				args = append(args, f, v)
			}
		}
		args = append(args, "--", "true")
		cmd := exec.Command(os.Args[0], args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitcode.Failure || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("keeper %q: %v, stderr %q; want exit %d saying %q", args[2:], err, stderr.String(), exitcode.Failure, c.want)
		}
	}
}

// churnMode is the churning tree a containment is held to: in a cgroup,
// half of it in sessions of its own; contained by the process group, all
// of it in the group, which the kernel kills in one step. A tree that also
// leaves the group is reached by a walk, which a tree that forks faster
// than it can be walked may outrun (docs/design.md, "What stays bounded").
func churnMode() string {
	if contain.Mode == ContainCgroup {
		return "churn-escape"
	}
	return "churn"
}

// churnPids waits for mode "churn"'s pids and its ready, and has the
// loops killed at cleanup should the code under test leave any.
func (s *started) churnPids(t *testing.T) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(strings.TrimPrefix(s.expect(t, "churn "), "churn ")) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	proctest.KillAtCleanup(t, pids...)
	s.expect(t, "ready")
	return pids
}

// A tree that forks without pause, ignores SIGTERM and leaves the child's
// group, with the supervisor gone (its pipe closed, as at kill -9): every
// process of it is gone when the keeper reports, and the report comes (the
// walk neither holds the keeper nor lets the loops outrun it).
func TestOrphanedStopReachesForkChurningTree(t *testing.T) {
	skipIfShort(t)
	eachContainment(t, func(t *testing.T) {
		s := startHelper(t, churnMode(), nil)
		loops := s.churnPids(t)
		s.c.mu.Lock()
		s.c.ctrl.Close()
		s.c.ctrl = nil
		s.c.mu.Unlock()
		if got := s.result(t); got != (Result{Code: 137, Reason: ReasonOrphaned}) {
			t.Fatalf("got %+v, want 137 orphaned", got)
		}
		checkGone(t, "loop", loops...)
	})
}

// The same tree with its keeper stopped: the supervisor's own fence kills
// it by the deadline.
func TestStoppedKeeperFencesForkChurningTree(t *testing.T) {
	skipIfShort(t)
	eachContainment(t, func(t *testing.T) {
		s := startHelper(t, churnMode(), func(sp *Spec) {
			sp.Deadline, sp.KillTimeout, sp.FenceMargin = bootclock.Now()+time.Hour, 200*time.Millisecond, 500*time.Millisecond
		})
		loops := s.churnPids(t)
		keeper := proctest.ParentOf(t, s.c.Pid())
		if err := syscall.Kill(keeper, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(keeper, syscall.SIGCONT) })
		// The deadline of a term cut off from etcd: it moves no more.
		f := Fence{Deadline: bootclock.Now() + 2*time.Second, KillTimeout: 200 * time.Millisecond, Margin: 500 * time.Millisecond}
		s.c.moveFenceTo(f.Deadline)
		for _, pid := range append([]int{s.c.Pid()}, loops...) {
			if !exitsBy(t, pid, f.Deadline) {
				t.Fatalf("process %d still runs at the deadline, its keeper stopped", pid)
			}
		}
		if got := s.result(t); got != (Result{Code: 137, Reason: ReasonFenced}) {
			t.Fatalf("got %+v, want 137 fenced", got)
		}
		checkGone(t, "loop", loops...)
	})
}

// A keeper stopped (SIGSTOP) fences nothing: the supervisor's own fence
// kills the child's tree by the deadline, and the term ends, fenced, once
// nothing of it is left.
func TestStoppedKeeperFencedBySupervisor(t *testing.T) {
	eachContainment(t, func(t *testing.T) {
		s := startHelper(t, "escapees", func(sp *Spec) {
			sp.Deadline, sp.KillTimeout, sp.FenceMargin = bootclock.Now()+time.Hour, 200*time.Millisecond, 500*time.Millisecond
		})
		holders := s.holders(t)
		keeper := proctest.ParentOf(t, s.c.Pid())
		if err := syscall.Kill(keeper, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(keeper, syscall.SIGCONT) })
		// The deadline of a term cut off from etcd: it moves no more.
		f := Fence{Deadline: bootclock.Now() + 2*time.Second, KillTimeout: 200 * time.Millisecond, Margin: 500 * time.Millisecond}
		s.c.moveFenceTo(f.Deadline)
		for _, pid := range append([]int{s.c.Pid()}, holders...) {
			if !exitsBy(t, pid, f.Deadline) {
				t.Fatalf("process %d still runs at the deadline, its keeper stopped", pid)
			}
		}
		// Resumed now, the keeper finds its child killed by a hand not its
		// own, and reports that; the term was fenced all the same.
		if err := syscall.Kill(keeper, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		if got := s.result(t); got != (Result{Code: 137, Reason: ReasonFenced}) {
			t.Fatalf("got %+v, want 137 fenced", got)
		}
		checkGone(t, "child", s.c.Pid())
		checkGone(t, "holder", holders...)
	})
}

// A descendant moved out of the child's cgroup (which takes write access
// to another one) is still the child's: the child ending on its own leaves
// an empty cgroup, yet the term ends only once that descendant is gone
// too. The keeper finds it as its own child: no walk of the tree, and no
// cgroup, sees it.
func TestDescendantMovedOutOfCgroupOutlivesNothing(t *testing.T) {
	useCgroups(t)
	away := filepath.Join(filepath.Dir(contain.Dir), "moved-out-test-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(away, 0o755); err != nil {
		t.Fatal(err)
	}
	s := startHelper(t, "grandchild", nil)
	line := s.expect(t, "grandchild ")
	gpid, _ := strconv.Atoi(strings.TrimPrefix(line, "grandchild "))
	t.Cleanup(func() {
		_ = syscall.Kill(gpid, syscall.SIGKILL)
		exitsBy(t, gpid, bootclock.Now()+10*time.Second)
		if err := os.Remove(away); err != nil {
			t.Errorf("remove %s: %v", away, err)
		}
	})
	s.expect(t, "ready")
	if err := os.WriteFile(filepath.Join(away, "cgroup.procs"), []byte(strconv.Itoa(gpid)), 0); err != nil {
		t.Fatal(err)
	}
	// The child ends on its own, not by a stop from its keeper.
	if err := syscall.Kill(s.c.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	s.result(t)
	if err := syscall.Kill(gpid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the grandchild moved out of the cgroup, %d, outlived the term: kill(0) = %v", gpid, err)
	}
}
