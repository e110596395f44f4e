package keeper

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/signals"
	"github.com/etcdlead/etcdlead/supervisor/internal/proctree"
)

// keeper is the keeper process once the child runs: one loop takes the
// supervisor's commands, the fence clock, the child's exit and the ends of
// orphans, and sends every signal itself.
type keeper struct {
	log    hclog.Logger
	pgid   int
	pid    int
	g      *groupState
	clock  *fenceClock
	cg     proctree.Cgroup                    // the child's cgroup; "": its process group alone
	events *proctree.Events                   // changes of cg's cgroup.events
	sweeps map[syscall.Signal]*proctree.Sweep // one per stop signal sent, so each process gets it once
	// unfinished are sweeps whose last walk was cut short.
	unfinished map[*proctree.Sweep]bool
	sigchld    chan os.Signal
	// kill is the fence's SIGKILL on a thread of its own, and killed tells
	// the loop it went out.
	kill   *bootclock.ThreadTimer
	killed chan struct{}
	// leaderReaped: the direct child is reaped, so its pid, the group's
	// id, may be reused; the group is no longer signalled. Written under
	// reap, which the kill's thread holds while it signals the group.
	reap         sync.Mutex
	leaderReaped bool
}

func newKeeper(log hclog.Logger, pid int, g *groupState, clock *fenceClock, cg proctree.Cgroup) *keeper {
	k := &keeper{log: log, pgid: pid, pid: pid, g: g, clock: clock, cg: cg,
		sweeps: map[syscall.Signal]*proctree.Sweep{}, unfinished: map[*proctree.Sweep]bool{}, sigchld: make(chan os.Signal, 1),
		killed: make(chan struct{}, 1)}
	if kt, err := bootclock.NewThreadTimer(k.fenceKill); err != nil {
		log.Warn("no thread of its own for the fence's SIGKILL; it goes out from the loop", "error", err)
	} else {
		k.kill = kt
		if kt.Realtime != nil {
			log.Debug("the fence's thread runs in the ordinary class", "error", kt.Realtime)
		}
	}
	// Orphans re-parented here end as this process's zombies; each end
	// says so, and they are reaped by pid (reapOthers).
	signal.Notify(k.sigchld, syscall.SIGCHLD)
	if cg != "" {
		w, err := proctree.WatchEvents(cg)
		if err != nil {
			log.Warn("cannot watch the child's cgroup; looking at it on a tick", "error", err)
		} else {
			k.events = w
		}
	}
	return k
}

func (k *keeper) close() {
	if k.kill != nil {
		k.kill.Close()
	}
	signal.Stop(k.sigchld)
	if k.events != nil {
		k.events.Close()
	}
	for _, sw := range k.sweeps {
		sw.Close()
	}
}

// loop runs until nothing of the child's tree is left: the direct child
// has exited and is reaped, its cgroup (if any) holds no live process, and
// the keeper has no other child (a subreaper inherits every orphan below
// it, in whatever group or session): finish.
func (k *keeper) loop(cmds <-chan Command, exited <-chan struct{}, sigs <-chan os.Signal) {
	var changed <-chan struct{}
	if k.events != nil {
		changed = k.events.Changed
	}
	now := make(chan time.Time)
	close(now)
	for {
		// The fence goes first, whatever else waits: a busy turn of the
		// loop must not hold it up.
		k.fenceDue()
		resweep := k.resweepAfter(now)
		select {
		case c, ok := <-cmds:
			k.command(c, ok, &cmds)
			continue
		case s := <-sigs:
			k.log.Debug("keeper ignores signal", "signal", s)
			continue
		case <-k.clock.wake:
			k.fenceCheck()
			continue
		case <-k.clock.ticks:
			k.fenceCheck()
			continue
		case <-k.killed:
			k.fenceCheck()
		case <-exited:
			exited = nil
			sigs := k.g.exited(bootclock.Now())
			// A child that leaves nothing behind, the common case, costs
			// no signal and no walk on the way to the report.
			if k.finish() {
				return
			}
			k.stopTree(sigs)
		case <-k.sigchld:
		case <-changed:
		case <-resweep:
			k.resweep()
		}
		if k.g.childGone && k.finish() {
			return
		}
	}
}

// fenceDue takes the fence's actions that are due, then arms its clock and
// its SIGKILL's thread for the next.
func (k *keeper) fenceDue() {
	if due := k.g.next(); due != 0 && bootclock.Now() >= due {
		k.fenceCheck()
	}
	k.clock.arm(k.g.next())
	if k.kill != nil {
		k.kill.At(k.g.nextKill())
	}
}

// resweepAfter is when the loop sweeps the tree again (nil: not on its
// own), given now, a closed channel. Walks cut short go on at once; once
// SIGKILL went out, the tree is swept again on a short tick until nothing
// is left: a walk of /proc can miss a process that forks or is re-parented
// while it reads.
func (k *keeper) resweepAfter(now <-chan time.Time) <-chan time.Time {
	switch {
	case len(k.unfinished) > 0:
		return now
	case k.g.killed, k.g.childGone && k.events == nil && k.cg != "":
		return time.After(Tick)
	}
	return nil
}

func (k *keeper) command(c Command, ok bool, cmds *<-chan Command) {
	if !ok {
		*cmds = nil
		k.stopTree(k.g.orphaned(bootclock.Now()))
		k.log.Warn("supervisor gone; stopping the child and its descendants", "pgid", k.pgid)
		return
	}
	k.apply(c)
}

func (k *keeper) apply(c Command) {
	now := bootclock.Now()
	switch c.Op {
	case OpDeadline:
		k.g.setDeadline(c.Deadline)
	case OpStop:
		k.log.Trace("stop received")
		k.stopTree(k.g.stop(now, c.Sig, ReasonStopped))
	case OpKill:
		k.stopTree(k.g.kill(ReasonStopped))
	case OpSignal:
		k.forward(c.Sig)
	}
}

func (k *keeper) fenceCheck() {
	before := k.g.stopping
	out := k.g.tick(bootclock.Now())
	k.stopTree(out)
	if !before && k.g.stopping && k.g.reason == ReasonFenced {
		k.log.Warn("fence: lease deadline near, stopping the child", "signal", signals.Name(k.g.killSignal))
	}
}

// forward passes a signal to the child's group only: it is a message to the
// child, which its own descendants in other groups never got from a
// terminal either.
func (k *keeper) forward(sig syscall.Signal) {
	if k.g.childGone {
		return
	}
	if err := syscall.Kill(-k.pgid, sig); err != nil && err != syscall.ESRCH {
		k.log.Warn("cannot signal the child's group", "signal", signals.Name(sig), "error", err)
	}
}

// stopTree sends each stop signal to everything of the child's: with a
// cgroup, to its members (SIGKILL through cgroup.kill, in one step; a stop
// signal to its frozen members, once each), else to the child's group and
// every descendant of the keeper, whatever its group or session, found by
// a walk of the tree. SIGKILL also goes to the group and the walk with a
// cgroup, for a descendant that moved itself out of it (which takes write
// access to another cgroup). The log lines come after every signal went
// out.
func (k *keeper) stopTree(sigs []syscall.Signal) {
	var errs []error
	for _, s := range sigs {
		if k.cg != "" {
			var err error
			if s == syscall.SIGKILL {
				err = k.cg.Kill()
			} else {
				err = k.cg.SignalFrozen(s)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s to cgroup %s: %w", signals.Name(s), k.cg, err))
			}
			if s != syscall.SIGKILL {
				continue
			}
		}
		group := 0
		if !k.leaderReaped {
			group = k.pgid
			if err := syscall.Kill(-k.pgid, s); err != nil && err != syscall.ESRCH {
				errs = append(errs, fmt.Errorf("%s to group %d: %w", signals.Name(s), k.pgid, err))
			}
		}
		sw := k.sweeps[s]
		if sw == nil {
			sw = proctree.NewSweep(os.Getpid(), s, group)
			k.sweeps[s] = sw
		}
		if err := k.walk(sw); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", signals.Name(s), err))
		}
	}
	for _, err := range errs {
		k.log.Warn("cannot signal every descendant", "error", err)
	}
}

// walk runs a sweep for at most proctree.WalkBudget, and never past the fence's next
// action; one cut short is marked to go on.
func (k *keeper) walk(sw *proctree.Sweep) error {
	until := bootclock.Now() + proctree.WalkBudget
	if next := k.g.next(); next != 0 && next < until {
		until = next
	}
	done, err := sw.Run(until)
	if done {
		delete(k.unfinished, sw)
	} else {
		k.unfinished[sw] = true
	}
	return err
}

// resweep goes on with the walks cut short, then, once SIGKILL went out,
// sends it again to whatever a walk finds now (orphans re-parented since,
// processes an earlier walk missed) and to the cgroup.
func (k *keeper) resweep() {
	for sw := range k.unfinished {
		if err := k.walk(sw); err != nil {
			k.log.Warn("cannot signal every descendant", "error", fmt.Errorf("%s: %w", signals.Name(sw.Sig), err))
		}
	}
	if sw := k.sweeps[syscall.SIGKILL]; sw != nil && !k.unfinished[sw] {
		if k.cg != "" {
			_ = k.cg.Kill()
		}
		if err := k.walk(sw); err != nil {
			k.log.Warn("cannot signal every descendant", "error", fmt.Errorf("SIGKILL: %w", err))
		}
	}
}

// fenceKill is the fence's SIGKILL, sent from the kill timer's own thread
// whatever the loop is doing: to the child's group (while its leader is
// not reaped), its cgroup, and every process a walk of the tree finds. The
// loop then sends it its own way too (groupState.tick), and sweeps on.
func (k *keeper) fenceKill() {
	k.reap.Lock()
	if !k.leaderReaped {
		_ = syscall.Kill(-k.pgid, syscall.SIGKILL)
	}
	k.reap.Unlock()
	if k.cg != "" {
		_ = k.cg.Kill()
	}
	sw := proctree.NewSweep(os.Getpid(), syscall.SIGKILL, 0)
	_, _ = sw.Run(bootclock.Now() + proctree.FenceWalk)
	sw.Close()
	select {
	case k.killed <- struct{}{}:
	default:
	}
}

// finish reaps what has ended and reports whether nothing of the tree is
// left. With a cgroup that holds nothing live, only a process moved out of
// it can be left, and the kernel tells whether one is without a walk of
// the tree: the direct child is reaped (the group is signalled no more),
// then any other child shows up to wait4. Without a cgroup the others are
// reaped first, by pid, and the direct child, whose exit was seen, last:
// its pid, the group's id, stays taken while the group may be signalled.
func (k *keeper) finish() bool {
	if k.cg != "" {
		if !k.cg.Empty() {
			return false
		}
	} else if k.reapOthers() > 0 {
		return false
	}
	if !k.leaderReaped {
		var ws syscall.WaitStatus
		k.reap.Lock()
		for {
			_, err := syscall.Wait4(k.pid, &ws, unix.WALL, nil)
			if err != syscall.EINTR {
				break
			}
		}
		k.g.reaped(ws)
		k.leaderReaped = true
		k.reap.Unlock()
		k.log.Trace("child reaped")
	}
	// The children files are exact only while no process is re-parented
	// as they are read, and with a cgroup they were not read: the kernel's
	// own answer decides. A child found now keeps the loop going, without
	// the group.
	for {
		pid, err := syscall.Wait4(-1, nil, unix.WALL|syscall.WNOHANG, nil)
		switch {
		case err == syscall.ECHILD:
			return true
		case err == syscall.EINTR, err == nil && pid > 0:
			continue
		}
		return false
	}
}

// reapOthers reaps, by pid, every child but the direct one that has ended,
// and returns how many still run. By pid: a wait for any child would reap
// the direct child too.
func (k *keeper) reapOthers() (running int) {
	for _, pid := range proctree.Children(os.Getpid()) {
		if pid == k.pid {
			continue
		}
		got, err := syscall.Wait4(pid, nil, unix.WALL|syscall.WNOHANG, nil)
		if err == nil && got == 0 || err != nil && !errors.Is(err, syscall.ECHILD) {
			running++
		}
	}
	return running
}
