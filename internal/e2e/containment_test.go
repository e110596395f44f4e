package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/ops"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
	"github.com/etcdlead/etcdlead/internal/testsupport/proctest"
	"github.com/etcdlead/etcdlead/supervisor"
)

// The process side of the promise against a tree busier than any walk of
// it, a keeper that is stopped, and a keeper killed under a frozen
// supervisor, in both containment modes (docs/design.md, "Containment").
// The probe's lock is the oracle, as everywhere: every process of the old
// term holds it until it dies.

// eachContainment runs f with the children contained by a cgroup each,
// then by their process group; flags select the mode. A cgroup needs root
// and a writable cgroup v2 hierarchy: under CI, which has both, their
// absence fails the test.
func eachContainment(t *testing.T, f func(t *testing.T, flags []string)) {
	t.Run("cgroup", func(t *testing.T) {
		if err := supervisor.CgroupSupport(); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("cgroup containment unavailable under CI: %v", err)
			}
			t.Skipf("cgroup containment unavailable: %v", err)
		}
		f(t, append([]string{"--containment=cgroup"}, fast...))
	})
	t.Run("process-group", func(t *testing.T) {
		f(t, append([]string{"--containment=process-group"}, fast...))
	})
}

// contained fails unless c logged the containment its flags asked for: a
// test of the cgroup must not pass on the process group.
func contained(t *testing.T, c *candidate, flags []string) {
	t.Helper()
	for _, f := range flags {
		if mode, ok := strings.CutPrefix(f, "--containment="); ok {
			c.log.waitFor(t, c.name, "containment="+mode, 0)
		}
	}
}

// e2eChurn is the probe's churn for the containment flags select.
func e2eChurn(flags []string) []string {
	if slices.Contains(flags, "--containment=cgroup") {
		return []string{"-churn", "100", "-churn-escape"}
	}
	return []string{"-churn", "100"}
}

// churnLoops waits for the probe's churn line and its ready line, and
// returns the loops' pids, killed at cleanup should any be left.
func churnLoops(t *testing.T, c *candidate) []int {
	t.Helper()
	line, _ := c.out.waitFor(t, c.name, "churn pids=", 0)
	var pids []int
	for _, f := range strings.Split(strings.TrimPrefix(line, "churn pids="), ",") {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("churn line %q: %v", line, err)
		}
		pids = append(pids, pid)
	}
	proctest.KillAtCleanup(t, pids...)
	c.out.waitFor(t, c.name, "ready", 0)
	return pids
}

// startChurning lets the loops of a probe started with -churn-on-usr1
// fork, and returns once the probe has opened their gate.
func startChurning(t *testing.T, c *candidate) {
	t.Helper()
	ready, _ := c.out.waitFor(t, c.name, "ready", 0)
	from := c.out.mark()
	if err := syscall.Kill(readyPid(t, ready), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	c.out.waitFor(t, c.name, "signal SIGUSR1", from)
}

func checkNotRunning(t *testing.T, what string, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if proctest.Running(pid) {
			t.Errorf("%s %d still runs when the successor started", what, pid)
		}
	}
}

// A leader's child whose hundred descendants ignore SIGTERM and fork
// without pause: its supervisor killed with SIGKILL, frozen, or cut off
// from etcd. The successor starts only once every one of them is gone. In
// a cgroup, half of them leave the child's group for sessions of their
// own; by the process group, they stay in it (a tree that leaves it is
// reached by a walk, which is bounded, not guaranteed: docs/design.md).
func TestForkChurningTreeFenced(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	eachContainment(t, func(t *testing.T, flags []string) {
		churn := e2eChurn(flags)
		for _, fault := range []string{"kill9", "sigstop", "partition"} {
			t.Run(fault, func(t *testing.T) {
				e := newEnv(t, cluster.Endpoints())
				p := newProxy(t, cluster.Endpoints()[0])
				c1 := e.via(p.Addr()).start("c1", flags, e.probe(append(churn, "-churn-on-usr1")...))
				contained(t, c1, flags)
				loops := churnLoops(t, c1)
				c2 := e.start("c2", flags, e.probe())
				c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
				// The tree forks only now: a leader whose renewals it
				// starved could lose its term before c2 queued, and the
				// fault would then meet no leader.
				startChurning(t, c1)
				switch fault {
				case "kill9":
					c1.signal(t, syscall.SIGKILL)
				case "sigstop":
					c1.signal(t, syscall.SIGSTOP)
				case "partition":
					p.Blackhole()
				}
				c2.out.waitFor(t, "c2", "ready", 0)
				checkNotRunning(t, "loop", loops)
				if fault == "sigstop" {
					c1.signal(t, syscall.SIGCONT)
				}
				p.Pass()
				stopAll(t, e, c1, c2)
			})
		}
	})
}

// keeperOf is the keeper of the child whose ready line is given, after
// checking that it runs a keeper binary.
func keeperOf(t *testing.T, ready string) (child, keeper int) {
	t.Helper()
	child = readyPid(t, ready)
	keeper = proctest.ParentOf(t, child)
	if exe, err := os.Readlink("/proc/" + strconv.Itoa(keeper) + "/exe"); err != nil || !strings.HasSuffix(exe, supervisor.KeeperName) {
		t.Fatalf("the child's parent %d is not a keeper: %q, %v", keeper, exe, err)
	}
	return child, keeper
}

// stopKeeper freezes a keeper with SIGSTOP, as a debugger or an operator
// would, and resumes it at cleanup.
func stopKeeper(t *testing.T, keeper int) {
	t.Helper()
	if err := syscall.Kill(keeper, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(keeper, syscall.SIGCONT) })
	deadline := time.Now().Add(safety)
	for !proctest.Stopped(keeper) {
		if time.Now().After(deadline) {
			t.Fatalf("keeper %d not stopped %v after SIGSTOP", keeper, safety)
		}
		time.Sleep(time.Millisecond)
	}
}

// A stopped keeper fences nothing; then the term ends: the leader is cut
// off from etcd, its key is deleted, or an operator resigns it. The
// supervisor's own fence kills the child by the SIGKILL point, so the
// successor, which waits for the lease, never runs beside it, and resign
// says the leader stepped down only once its child is gone.
func TestStoppedKeeperStillFenced(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	eachContainment(t, func(t *testing.T, flags []string) {
		for _, fault := range []string{"partition", "key-deleted", "resign"} {
			t.Run(fault, func(t *testing.T) {
				e := newEnv(t, cluster.Endpoints())
				p := newProxy(t, cluster.Endpoints()[0])
				c1 := e.via(p.Addr()).start("c1", flags, e.probe())
				contained(t, c1, flags)
				ready, _ := c1.out.waitFor(t, "c1", "ready", 0)
				child, keeper := keeperOf(t, ready)
				c2 := e.start("c2", flags, e.probe())
				c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
				stopKeeper(t, keeper)
				switch fault {
				case "partition":
					p.Blackhole()
				case "key-deleted":
					key, _ := leaseOf(t, cluster.Client(t), e.prefix+"probe/", "c1")
					if _, err := cluster.Client(t).Delete(ctxT(t), key); err != nil {
						t.Fatal(err)
					}
				case "resign":
					out, errs, code := e.etcdleadCmd("resign", "--election=probe", "--id=c1")
					running := proctest.Running(child)
					if code != 0 || !strings.Contains(out, "stepped down") {
						t.Fatalf("resign: exit %d, %q %q", code, out, errs)
					}
					if running {
						t.Errorf("resign said %q while the leader's child %d still ran", strings.TrimSpace(out), child)
					}
				}
				c2.out.waitFor(t, "c2", "ready", 0)
				checkNotRunning(t, "the old child", []int{child})
				p.Pass()
				stopAll(t, e, c1, c2)
			})
		}
	})
}

// Bounded, not excluded (docs/how-it-works.md, "What is guaranteed"): a
// supervisor frozen, then its keeper killed. The child dies with its
// keeper (parent-death signal), but what it started is re-parented to the frozen
// supervisor, and neither fencer is left to kill it until the supervisor
// runs again; then it kills and reaps all of it at once.
func TestKeeperKilledUnderFrozenSupervisorEndsAtResume(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	eachContainment(t, func(t *testing.T, flags []string) {
		e := newEnv(t, cluster.Endpoints())
		// No fence for the length of the test: only the supervisor's
		// clean-up can end what the keeper left.
		c1 := e.start("c1", []string{flags[0], "--ttl=60s"}, e.probe("-escapees"))
		contained(t, c1, flags)
		_, pids := escapees(t, c1)
		ready, _ := c1.out.find("ready")
		_, keeper := keeperOf(t, ready)
		c1.signal(t, syscall.SIGSTOP)
		if err := syscall.Kill(keeper, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitGone(t, keeper) // exited: the frozen supervisor cannot reap it
		for _, pid := range pids {
			if !proctest.Running(pid) {
				t.Fatalf("escapee %d ended under a frozen supervisor: the bound docs/how-it-works.md states is wrong", pid)
			}
		}
		c1.signal(t, syscall.SIGCONT)
		c1.log.waitFor(t, "c1", "keeper died without a report", 0)
		for _, pid := range pids {
			waitGone(t, pid)
		}
		c1.stop(t)
		c1.exit(t)
	})
}

// The containment in force is shown at start-up, in /status and, from the
// term's sentinel, in status --json; the child runs in a cgroup of its own
// with cgroup containment; and no cgroup is left once etcdlead exits.
func TestContainmentShownAndCleanedUp(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	eachContainment(t, func(t *testing.T, flags []string) {
		mode := strings.TrimPrefix(flags[0], "--containment=")
		e := newEnv(t, cluster.Endpoints())
		addr := freeAddr(t)
		c1 := e.start("c1", append(flags, "--status-addr="+addr), e.probe())
		line, _ := c1.log.waitFor(t, "c1", "containment="+mode, 0)
		ready, _ := c1.out.waitFor(t, "c1", "ready", 0)
		_, body := httpGet(t, "http://"+addr+"/status")
		var s ops.Instance
		if err := json.Unmarshal([]byte(body), &s); err != nil || s.Containment == nil || s.Containment.Mode != mode || s.Containment.Reason == "" {
			t.Errorf("/status = %s (%v), want containment %s with its reason", body, err, mode)
		}
		out, _, _ := e.etcdleadCmd("status", "--election=probe", "--json")
		var el electionJSON
		if err := json.Unmarshal([]byte(out), &el); err != nil || el.Leader == nil || el.Leader.Containment != mode {
			t.Errorf("status --json = %s (%v), want the leader's containment %s", out, err, mode)
		}
		cg, err := os.ReadFile("/proc/" + strconv.Itoa(readyPid(t, ready)) + "/cgroup")
		if err != nil {
			t.Fatal(err)
		}
		inOwn := strings.Contains(string(cg), "/etcdlead-"+strconv.Itoa(c1.cmd.Process.Pid)+"-")
		if inOwn != (mode == "cgroup") {
			t.Errorf("with containment %s the child's cgroup is %q", mode, cg)
		}
		c1.stop(t)
		c1.exit(t)
		if mode == "cgroup" {
			dir := strings.TrimSuffix(strings.SplitN(line, "cgroup=", 2)[1], "\n")
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("etcdlead's cgroup %s is left behind after it exited (%v)", dir, err)
			}
		}
	})
}

// ownCgroupDir is this test process's cgroup directory in the v2
// hierarchy, read as etcdlead reads it (supervisor/containment_linux.go).
func ownCgroupDir(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var own string
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			own = p
		}
	}
	root, err := proctest.Cgroup2Root()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, own)
}

// A cgroup that cannot be made (here: etcdlead runs in a cgroup that
// allows none below it) costs the default no start: the child runs,
// contained by its process group, with one line that says why; with
// --containment=cgroup it is a refusal, exit 125, and no child.
func TestNoCgroupFallsBackOrRefuses(t *testing.T) {
	skipIfShort(t)
	if err := supervisor.CgroupSupport(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cgroup containment unavailable under CI: %v", err)
		}
		t.Skipf("cgroup containment unavailable: %v", err)
	}
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	shallow := filepath.Join(ownCgroupDir(t), "etcdlead-test-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(shallow, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Its last keeper may still be on its way out.
		for end := time.Now().Add(safety); syscall.Rmdir(shallow) == syscall.EBUSY && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
	})
	if err := os.WriteFile(filepath.Join(shallow, "cgroup.max.depth"), []byte("0"), 0); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(shallow, syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	startIn := func(name string, flags ...string) *candidate {
		args := append([]string{"run", "--endpoints=" + strings.Join(e.endpoints, ","), "--prefix=" + e.prefix, "--id=" + name}, append(flags, fast...)...)
		cmd := exec.Command(etcdleadBin(), append(append(args, "--"), e.probe()...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
		return e.launch(name, cmd)
	}
	c1 := startIn("c1")
	c1.out.waitFor(t, "c1", "ready", 0)
	if n := c1.log.count("containment=process-group"); n != 1 || c1.log.count("allows no more cgroups") != 1 {
		t.Errorf("want one start line saying process-group and why:\n%s", c1.log)
	}
	c1.stop(t)
	c1.exit(t)
	c2 := startIn("c2", "--containment=cgroup")
	if code := c2.exit(t); code != 125 {
		t.Fatalf("--containment=cgroup without a cgroup: exit %d, want 125", code)
	}
	// Its exit can come before its stderr is read to the end: waited for.
	if line, _ := c2.log.waitFor(t, "c2", "--containment=cgroup", 0); !strings.Contains(line, "allows no more cgroups") {
		t.Errorf("want one line naming the problem:\n%s", c2.log)
	}
	if e.jobRuns(t) != 1 {
		t.Errorf("a refused run started a child")
	}
}

// Both the supervisor and its keeper killed (the keeper first, under a
// frozen supervisor): what the child started is left in its cgroup with
// nobody to stop it. The next etcdlead started in the same cgroup, of any
// election, kills it and removes the dead one's cgroups.
func TestStaleCgroupOfDeadEtcdleadRemoved(t *testing.T) {
	skipIfShort(t)
	if err := supervisor.CgroupSupport(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cgroup containment unavailable under CI: %v", err)
		}
		t.Skipf("cgroup containment unavailable: %v", err)
	}
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c1 := e.start("c1", []string{"--containment=cgroup", "--ttl=60s"}, e.probe("-escapees"))
	line, _ := c1.log.waitFor(t, "c1", "containment=cgroup", 0)
	dir := strings.TrimSpace(strings.SplitN(line, "cgroup=", 2)[1])
	_, pids := escapees(t, c1)
	ready, _ := c1.out.find("ready")
	_, keeper := keeperOf(t, ready)
	c1.signal(t, syscall.SIGSTOP)
	if err := syscall.Kill(keeper, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c1.signal(t, syscall.SIGKILL)
	c1.exit(t)
	for _, pid := range pids {
		if !proctest.Running(pid) {
			t.Fatalf("escapee %d ended with nobody to stop it", pid)
		}
	}
	c2 := e.start("c2", []string{"--containment=cgroup", "--election=other"}, e.probe())
	c2.out.waitFor(t, "c2", "ready", 0)
	c2.log.waitFor(t, "c2", "killed what a dead etcdlead left in its cgroup", 0)
	for _, pid := range pids {
		if ok, err := proctest.GoneBy(pid, time.Now().Add(safety)); !ok {
			t.Errorf("escapee %d still runs (%v)", pid, err)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the dead etcdlead's cgroup %s is still there (%v)", dir, err)
	}
	c2.stop(t)
	c2.exit(t)
}

// resign reports a step-down only once the leader's lease has ended, not
// when its key goes: here the key is deleted by hand while the leader is
// frozen, and its child runs on until the keeper's fence.
func TestResignWaitsForTheLease(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c1 := e.start("c1", fast, e.probe())
	ready, _ := c1.out.waitFor(t, "c1", "ready", 0)
	child := readyPid(t, ready)
	cli := cluster.Client(t)
	key, lease := leaseOf(t, cli, e.prefix+"probe/", "c1")
	c1.signal(t, syscall.SIGSTOP)
	t.Cleanup(func() { _ = c1.cmd.Process.Signal(syscall.SIGCONT) })
	type result struct {
		out, errs string
		code      int
	}
	wctx, stop := context.WithCancel(ctxT(t))
	defer stop()
	now, err := cli.Get(ctxT(t), e.prefix+"probe.resign")
	if err != nil {
		t.Fatal(err)
	}
	requests := cli.Watch(wctx, e.prefix+"probe.resign", clientv3.WithFilterDelete(), clientv3.WithRev(now.Header.Revision+1))
	asked := make(chan struct{})
	go func() {
		for resp := range requests {
			if len(resp.Events) > 0 {
				close(asked)
				return
			}
		}
	}()
	done := make(chan result, 1)
	go func() {
		cmd := exec.Command(etcdleadBin(), "resign", "--endpoints="+strings.Join(e.endpoints, ","), "--prefix="+e.prefix,
			"--election=probe", "--timeout=30s")
		var out, errs strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errs
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		done <- result{out.String(), errs.String(), code}
	}()
	// The request is in etcd once resign waits on it.
	select {
	case <-asked:
	case <-time.After(safety):
		t.Fatal("no resign request in etcd")
	}
	if _, err := cli.Delete(ctxT(t), key); err != nil {
		t.Fatal(err)
	}
	r := <-done
	running := proctest.Running(child)
	ttl, err := cli.TimeToLive(ctxT(t), lease)
	if r.code != 0 || !strings.Contains(r.out, "stepped down") {
		t.Fatalf("resign: exit %d, %q %q", r.code, r.out, r.errs)
	}
	if running || err != nil || ttl.TTL != -1 {
		t.Errorf("resign said %q while the child ran (%v) or the lease lived (TTL %d, %v)", strings.TrimSpace(r.out), running, ttl.TTL, err)
	}
	c1.signal(t, syscall.SIGCONT)
	c1.stop(t)
	c1.exit(t)
}
