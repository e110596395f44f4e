package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
	"github.com/etcdlead/etcdlead/internal/testsupport/proctest"
	"github.com/etcdlead/etcdlead/supervisor"
)

// The keeper's reach, end to end: descendants that leave the child's
// process group (a new group, a new session, timeout(1)) share the probe's
// lock, so a successor whose probe takes the lock proves they are gone; the
// tests check their pids too.

// escapees waits for the probe's ready line and returns the pids of the
// escapees it reported before it (holders, and timeout(1) around one). A
// failing keeper would leave them running: they are SIGKILLed at cleanup
// through pidfds, so a reused pid is never hit.
func escapees(t *testing.T, c *candidate) (child int, pids []int) {
	t.Helper()
	ready, i := c.out.waitFor(t, c.name, "ready", 0)
	all, _, _ := c.out.snapshot()
	pids = escapeePids(all[:i])
	if len(pids) < 2 {
		t.Fatalf("the probe reported %d escapees, want at least 2:\n%s", len(pids), strings.Join(all[:i], "\n"))
	}
	proctest.KillAtCleanup(t, pids...)
	return readyPid(t, ready), pids
}

// escapeePids are the pids in the probe's "escapee ... pid=N [holder=N]"
// lines among ls.
func escapeePids(ls []string) []int {
	var pids []int
	for _, l := range ls {
		if !strings.HasPrefix(l, "escapee ") {
			continue
		}
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "pid="); ok {
				f = "holder=" + v
			}
			if v, ok := strings.CutPrefix(f, "holder="); ok {
				if pid, err := strconv.Atoi(v); err == nil {
					pids = append(pids, pid)
				}
			}
		}
	}
	return pids
}

// checkGone fails for each pid that still exists (a zombie counts: nobody
// reaped it).
func checkGone(t *testing.T, when string, pids []int) {
	for _, pid := range pids {
		if !proctest.Gone(pid) {
			t.Errorf("escapee %d still exists %s", pid, when)
		}
	}
}

// A stop, the fence (the supervisor frozen) and kill -9 of the supervisor
// each reach the escapees, and the successor starts only after they are
// gone.
func TestEscapeesGoneBeforeSuccessorStarts(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	for _, fault := range []struct {
		name        string
		sig, resume syscall.Signal
	}{
		{"stop", syscall.SIGTERM, 0},
		{"fence", syscall.SIGSTOP, syscall.SIGCONT},
		{"kill9", syscall.SIGKILL, 0},
	} {
		t.Run(fault.name, func(t *testing.T) {
			e := newEnv(t, cluster.Endpoints())
			c1 := e.start("c1", fast, e.probe("-escapees"))
			_, pids := escapees(t, c1)
			c2 := e.start("c2", fast, e.probe())
			c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
			c1.signal(t, fault.sig)
			c2.out.waitFor(t, "c2", "ready", 0)
			checkGone(t, "when the successor started", pids)
			if fault.resume != 0 {
				c1.signal(t, fault.resume)
			}
			stopAll(t, e, c1, c2)
		})
	}
}

// The winner's standby keeper, SIGKILLed while it waits for its term: the
// term still starts its child, under a fresh keeper.
func TestStandbyKeeperKilledTermStillStarts(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c1 := e.start("c1", fast, e.probe())
	c1.out.waitFor(t, "c1", "ready", 0)
	c2 := e.start("c2", fast, e.probe())
	// The standby keeper starts before the campaign that logs this.
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
	keeper := standbyKeeperOf(t, c2.cmd.Process.Pid)
	if err := syscall.Kill(keeper, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, keeper)
	c1.signal(t, syscall.SIGTERM)
	c1.exit(t)
	c2.out.waitFor(t, "c2", "ready", 0)
	c2.log.waitFor(t, "c2", "starting the child under a fresh keeper", 0)
	stopAll(t, e, c2)
}

// standbyKeeperOf finds the one keeper process among a supervisor's
// children, in either shape (isKeeper).
func standbyKeeperOf(t *testing.T, supervisor int) int {
	t.Helper()
	names, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var found []int
	for _, n := range names {
		pid, err := strconv.Atoi(n.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + n.Name() + "/cmdline")
		if err != nil || !isKeeper(cmdline) {
			continue
		}
		if proctest.ParentOf(t, pid) == supervisor {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		t.Fatalf("supervisor %d has keepers %v, want one standby keeper", supervisor, found)
	}
	return found[0]
}

// isKeeper tells a keeper by its command line: the keeper binary, or
// etcdlead re-executed in its keeper mode.
func isKeeper(cmdline []byte) bool {
	argv := bytes.Split(cmdline, []byte{0})
	return len(argv) > 1 && (filepath.Base(string(argv[0])) == supervisor.KeeperName || string(argv[1]) == supervisor.KeeperArg)
}

// The keeper binary beside etcdlead is the keeper, the standby one and the
// one of a term; etcdlead installed alone re-executes itself as the keeper,
// and says so in one debug line per process, not one per keeper.
func TestKeeperBinaryOrSelfExec(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	alone := filepath.Join(t.TempDir(), "etcdlead")
	b, err := os.ReadFile(etcdleadBin())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	const fallback = "the keeper is a re-exec of this binary"
	for _, c := range []struct {
		name, bin, keeper string
		fallbacks         int
	}{
		{"beside", etcdleadBin(), filepath.Join(binDir, supervisor.KeeperName), 0},
		{"alone", alone, alone, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, cluster.Endpoints())
			c1 := e.startBin(c.bin, "c1", fast, e.probe())
			line, _ := c1.out.waitFor(t, "c1", "ready", 0)
			checkExe(t, "c1's keeper", proctest.ParentOf(t, readyPid(t, line)), c.keeper)
			c2 := e.startBin(c.bin, "c2", fast, e.probe())
			c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
			checkExe(t, "c2's standby keeper", standbyKeeperOf(t, c2.cmd.Process.Pid), c.keeper)
			c1.stop(t)
			line, _ = c2.out.waitFor(t, "c2", "ready", 0)
			checkExe(t, "c2's keeper", proctest.ParentOf(t, readyPid(t, line)), c.keeper)
			stopAll(t, e, c1, c2)
			for _, c1c2 := range []*candidate{c1, c2} {
				if n := c1c2.log.count(fallback); n != c.fallbacks {
					t.Errorf("%s logged the fallback %d times, want %d", c1c2.name, n, c.fallbacks)
				}
			}
		})
	}
}

func checkExe(t *testing.T, what string, pid int, want string) {
	t.Helper()
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		t.Fatal(err)
	}
	if exe != want {
		t.Errorf("%s (pid %d) runs %s, want %s", what, pid, exe, want)
	}
}

// The keeper SIGKILLed while its child runs with escapees: the supervisor
// kills what the keeper left and revokes only once it is gone. Its lease is
// renewed throughout, so nothing else would stop them.
func TestKeeperKilledNoDescendantOutlivesRevoke(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c1 := e.start("c1", fast, e.probe("-escapees"))
	child, pids := escapees(t, c1)
	keeper := proctest.ParentOf(t, child)
	c2 := e.start("c2", fast, e.probe())
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
	if err := syscall.Kill(keeper, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c2.out.waitFor(t, "c2", "ready", 0)
	checkGone(t, "when the successor started", append(pids, child))
	if code := c1.exit(t); code != 125 {
		t.Errorf("c1 exit code %d after its keeper died, want 125", code)
	}
	c1.log.waitFor(t, "c1", "keeper died without a report", 0)
	stopAll(t, e, c2)
}

// The leader's stderr is a pipe that nobody reads, full to the brim, and
// then the leader is cut off from etcd: no log write holds up its keeper's
// fence or its supervisor, the successor starts once the old child is gone,
// and once stderr drains the supervisor's lines from the stall arrive, or
// the count of those it dropped.
func TestStalledStderrThenPartition(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	p := newProxy(t, cluster.Endpoints()[0])
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	c1 := startWithStderr(t, e.via(p.Addr()), "c1", fast, e.probe(), w)
	c1.out.waitFor(t, "c1", "ready", 0)
	c2 := e.start("c2", fast, e.probe())
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
	if err := proctest.Fill(fmt.Sprintf("/proc/self/fd/%d", w.Fd())); err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	c2.out.waitFor(t, "c2", "ready", 0)
	drained := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		drained <- string(b)
	}()
	p.Pass()
	c1.signal(t, syscall.SIGTERM)
	c1.exit(t)
	w.Close()
	stopAll(t, e, c2)
	// The keeper's lines may be lost: it ended long ago, and waits for a
	// blocked stderr only for a bounded flush.
	select {
	case out := <-drained:
		if !strings.Contains(out, "etcdlead: child exited") && !strings.Contains(out, "log lines dropped") {
			t.Errorf("the supervisor's lines from the stall never came out; stderr ended with:\n%q", out[max(len(out)-2000, 0):])
		}
	case <-time.After(safety):
		t.Fatal("stderr still open: the keeper or the supervisor lives on")
	}
}

// startWithStderr is env.start with the candidate's stderr given; the test
// reads it, or not, itself.
func startWithStderr(t *testing.T, e *env, name string, flags, command []string, stderr *os.File) *candidate {
	t.Helper()
	args := append([]string{"run", "--endpoints=" + strings.Join(e.endpoints, ","), "--prefix=" + e.prefix, "--id=" + name}, flags...)
	cmd := exec.Command(etcdleadBin(), append(append(args, "--"), command...)...)
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = stdoutW, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c := &candidate{name: name, cmd: cmd, out: newLines(stdoutR), log: newLines(strings.NewReader("")), done: make(chan struct{})}
	err = cmd.Start()
	stdoutW.Close()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		c.code = cmd.ProcessState.ExitCode()
		close(c.done)
	}()
	t.Cleanup(func() {
		if c.running() {
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
		<-c.done
		if t.Failed() {
			t.Logf("%s stdout:\n%s", name, c.out)
		}
	})
	return c
}
