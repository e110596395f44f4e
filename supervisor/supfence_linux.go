package supervisor

import (
	"syscall"
	"time"

	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/supervisor/internal/keeper"
	"github.com/etcdlead/etcdlead/supervisor/internal/proctree"
)

// The supervisor's own fence (docs/design.md, "Two fencers"). The keeper
// fences the child on its own clock, which is what holds when this process
// is frozen, killed or cut off from etcd; but a keeper that is stopped
// (SIGSTOP, a debugger), or starved of CPU by the very tree it must kill,
// fences nothing, and the lease it guards ends all the same. So this
// process keeps the keeper's deadline too and, when the keeper has not
// reported the child's tree gone by the SIGKILL point (deadline − m), kills
// the tree itself, whether or not the keeper answers: SIGKILL to the
// child's cgroup and to every process below the keeper, its own child, so
// that no pid it signals can have been reused. Never a second stop signal,
// which means "quit now" to many programs. A keeper that has still not
// reported after keeperReportWait is killed too: what it leaves is then
// this process's to kill and reap (Child.wait), and the term ends, and the
// lease is revoked, only once that is gone.

// keeperReportWait is how long a keeper has to report after this process
// fenced its child, before it is taken for stopped and killed. The tree is
// dead by then; only the report is waited for.
const keeperReportWait = time.Second

// superviseFence runs for the child's life.
func (c *Child) superviseFence() {
	fired := make(chan struct{}, 1)
	kt, err := bootclock.NewThreadTimer(func() {
		c.fenceKill()
		fired <- struct{}{}
	})
	if err != nil {
		c.log.Error("no boot-clock timer: only the keeper fences the child", "error", err)
		return
	}
	defer kt.Close()
	if kt.Realtime != nil {
		c.log.Debug("the fence's thread runs in the ordinary class", "error", kt.Realtime)
	}
	for {
		c.mu.Lock()
		at := c.fence.KillAt()
		if c.fence.Deadline == 0 {
			at = 0
		}
		c.mu.Unlock()
		kt.At(at)
		select {
		case <-c.done:
			return
		case <-c.moved:
			continue
		case <-fired:
		}
		break
	}
	wait := time.NewTimer(keeperReportWait)
	defer wait.Stop()
	tick := time.NewTicker(keeper.Tick)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
			c.fenceKill()
			continue
		case <-wait.C:
		}
		break
	}
	c.log.Error("the keeper did not report the child's end by the fence's SIGKILL point: killed the child's tree, and now the keeper",
		"pid", c.keeper.cmd.Process.Pid, "pgid", c.pid, "cgroup", string(c.cg))
	_ = c.keeper.cmd.Process.Signal(syscall.SIGKILL)
}

// fenceKill SIGKILLs the child's cgroup, its group and every process below
// the keeper, unless the child's end was published already. Every process
// found below the keeper is held by a pidfd and checked against its parent
// before it is signalled, so no pid is hit that was reused.
func (c *Child) fenceKill() {
	select {
	case <-c.done:
		return
	default:
	}
	c.mu.Lock()
	c.fenced = true
	c.mu.Unlock()
	if c.cg != "" {
		_ = c.cg.Kill()
	}
	keeper := c.keeper.cmd.Process.Pid
	// The child's group first, in one step: the keeper reaps the child,
	// whose pid is the group's id, only once its cgroup, or without one its
	// whole tree, holds nothing else (keeper.finish), so while the child is
	// still the keeper's the id is the group's. Pids are handed out in
	// turn, so the moment between that look and the kill(2) is far too
	// short for the id to come round again.
	if st, err := proctree.ReadStat(c.pid); err == nil && st.PPid == keeper {
		_ = syscall.Kill(-c.pid, syscall.SIGKILL)
	}
	sw := proctree.NewSweep(keeper, syscall.SIGKILL, 0)
	_, _ = sw.Run(bootclock.Now() + proctree.FenceWalk)
	sw.Close()
}

// moveFence moves this process's fence to a later deadline.
func (c *Child) moveFence(d time.Duration) {
	c.mu.Lock()
	c.fence.MoveTo(d)
	c.mu.Unlock()
	select {
	case c.moved <- struct{}{}:
	default:
	}
}

func (c *Child) supervisorFenced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fenced
}
