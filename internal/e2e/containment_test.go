package e2e

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/etcdtest"
	"github.com/etcdlead/etcdlead/internal/proctest"
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
	cluster := etcdtest.Start(t, etcdtest.Options{})
	eachContainment(t, func(t *testing.T, flags []string) {
		churn := e2eChurn(flags)
		for _, fault := range []string{"kill9", "sigstop", "partition"} {
			t.Run(fault, func(t *testing.T) {
				e := newEnv(t, cluster.Endpoints())
				p := newProxy(t, cluster.Endpoints()[0])
				c1 := e.via(p.Addr()).start("c1", flags, e.probe(churn...))
				contained(t, c1, flags)
				loops := churnLoops(t, c1)
				c2 := e.start("c2", flags, e.probe())
				c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
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

// Bounded, not excluded (README.md, "What is guaranteed"): a supervisor
// frozen, then its keeper killed. The child dies with its keeper
// (parent-death signal), but what it started is re-parented to the frozen
// supervisor, and neither fencer is left to kill it until the supervisor
// runs again; then it kills and reaps all of it at once.
func TestKeeperKilledUnderFrozenSupervisorEndsAtResume(t *testing.T) {
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
				t.Fatalf("escapee %d ended under a frozen supervisor: the bound the README states is wrong", pid)
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
