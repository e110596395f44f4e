package supervisor

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/internal/trace"
	"github.com/etcdlead/etcdlead/signals"
)

// keeper is the keeper process once the child runs: one loop takes the
// supervisor's commands, the fence clock and the reaper's events, and sends
// every signal itself.
type keeper struct {
	log    hclog.Logger
	pgid   int
	pid    int
	g      *groupState
	clock  *fenceClock
	sweeps map[syscall.Signal]*sweep // one per stop signal sent, so each process gets it once
}

// loop runs until the keeper has no child left at all (ECHILD):
// the child and every descendant, in whatever group or session, are gone,
// because a subreaper inherits every orphan below it.
func (k *keeper) loop(cmds <-chan command, reaped <-chan reapEvent, sigs <-chan os.Signal) {
	for {
		k.clock.arm(k.g.next())
		// Once SIGKILL went out, sweep again on a short tick until nothing
		// is left: a walk of /proc can miss a process that forks or is
		// re-parented while it reads.
		var resweep <-chan time.Time
		if k.g.killed {
			resweep = time.After(keeperTick)
		}
		select {
		case c, ok := <-cmds:
			k.command(c, ok, &cmds)
		case ev, ok := <-reaped:
			if !ok || k.reaped(ev) {
				return
			}
		case s := <-sigs:
			k.log.Debug("keeper ignores signal", "signal", s)
		case <-k.clock.wake:
			k.fenceCheck()
		case <-k.clock.ticks:
			k.fenceCheck()
		case <-resweep:
			k.resweep()
		}
	}
}

func (k *keeper) command(c command, ok bool, cmds *<-chan command) {
	if !ok {
		*cmds = nil
		k.stopTree(k.g.orphaned(Now()))
		k.log.Warn("supervisor gone; stopping the child and its descendants", "pgid", k.pgid)
		return
	}
	k.apply(c)
}

// reaped takes any process the keeper reaped: the child, or an orphan
// re-parented to it. A descendant that ends while the child runs is simply
// gone. It reports whether nothing is left: the child is reaped and the
// keeper has no child at all. A subreaper inherits every orphan below it
// before the orphan's parent can be reaped, so no descendant can remain;
// the loop ends then, without waiting for the reaper's own wait4 to say
// so, which costs two hand-offs of the keeper's one P between the
// reaper's locked thread and the loop's (keeper_linux.go, runChild).
func (k *keeper) reaped(ev reapEvent) bool {
	if ev.pid == k.pid {
		sigs := k.g.exited(Now(), ev.status)
		// A child that leaves nothing behind, the common case, costs no
		// walk of /proc on the way to the report.
		if !hasChildren() {
			return true
		}
		k.stopTree(sigs)
	}
	if k.g.killed {
		k.resweep()
	}
	return k.g.childExit != nil && !hasChildren()
}

func (k *keeper) apply(c command) {
	now := Now()
	switch c.op {
	case msgDeadline:
		k.g.setDeadline(c.deadline)
	case msgStop:
		trace.Mark("keeper.stop-msg")
		k.stopTree(k.g.stop(now, c.sig, ReasonStopped))
	case msgKill:
		k.stopTree(k.g.kill(ReasonStopped))
	case msgSignal:
		k.forward(c.sig)
	}
}

func (k *keeper) fenceCheck() {
	before := k.g.stopping
	out := k.g.tick(Now())
	k.stopTree(out)
	if !before && k.g.stopping && k.g.reason == ReasonFenced {
		k.log.Warn("fence: lease deadline near, stopping the child", "signal", signals.Name(k.g.killSignal))
	}
}

// forward passes a signal to the child's group only: it is a message to the
// child, which its own descendants in other groups never got from a
// terminal either.
func (k *keeper) forward(sig syscall.Signal) {
	if k.g.childExit != nil {
		return // its group id may be reused once it is reaped
	}
	if err := syscall.Kill(-k.pgid, sig); err != nil && err != syscall.ESRCH {
		k.log.Warn("cannot signal the child's group", "signal", signals.Name(sig), "error", err)
	}
}

// stopTree sends each stop signal to the child's group and to every
// descendant of the keeper, whatever its group or session; the log lines
// come after every signal went out.
func (k *keeper) stopTree(sigs []syscall.Signal) {
	var errs []error
	for _, s := range sigs {
		group := 0
		// Once the child is reaped its pid, the group's id, may be reused;
		// its group's members are all below the keeper, so the sweep
		// reaches them.
		if k.g.childExit == nil {
			group = k.pgid
			if err := syscall.Kill(-k.pgid, s); err != nil && err != syscall.ESRCH {
				errs = append(errs, fmt.Errorf("%s to group %d: %w", signals.Name(s), k.pgid, err))
			}
		}
		sw := k.sweeps[s]
		if sw == nil {
			sw = newSweep(os.Getpid(), s, group)
			k.sweeps[s] = sw
		}
		if err := sw.run(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", signals.Name(s), err))
		}
	}
	for _, err := range errs {
		k.log.Warn("cannot signal every descendant", "error", err)
	}
}

// resweep sends SIGKILL to whatever a walk finds now: orphans re-parented
// since, processes an earlier walk missed.
func (k *keeper) resweep() {
	if sw := k.sweeps[syscall.SIGKILL]; sw != nil {
		if err := sw.run(); err != nil {
			k.log.Warn("cannot signal every descendant", "error", fmt.Errorf("SIGKILL: %w", err))
		}
	}
}

func (k *keeper) closeSweeps() {
	for _, sw := range k.sweeps {
		sw.close()
	}
}

// hasChildren asks the kernel, without reaping, whether the keeper has any
// child left.
func hasChildren() bool {
	var si unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &si, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
	return err != unix.ECHILD
}
