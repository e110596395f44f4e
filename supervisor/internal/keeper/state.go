package keeper

import (
	"syscall"
	"time"

	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/internal/fence"
)

// groupState decides, from events and the boot clock, which signals the
// keeper sends to the child's group. It does no I/O, so the fence and the
// stop sequence are tested with a fake clock.
type groupState struct {
	fence      fence.Fence
	killSignal syscall.Signal

	reason    Reason        // why the group is ending; "" while it runs
	stopping  bool          // the stop signal went out
	graceEnd  time.Duration // SIGKILL at this time while stopping
	killed    bool          // SIGKILL went out
	childGone bool          // the direct child has exited (it is reaped last)
	childExit *syscall.WaitStatus
}

// setDeadline moves the fence later (fence.Fence.MoveTo).
func (s *groupState) setDeadline(d time.Duration) { s.fence.MoveTo(d) }

// stop begins a graceful stop with sig, unless one is already under way.
func (s *groupState) stop(now time.Duration, sig syscall.Signal, why Reason) []syscall.Signal {
	if s.reason == "" {
		s.reason = why
	}
	if s.stopping || s.killed {
		return nil
	}
	s.stopping = true
	s.graceEnd = s.fence.GraceEnd(now)
	return []syscall.Signal{sig}
}

// kill sends SIGKILL at once.
func (s *groupState) kill(why Reason) []syscall.Signal {
	if s.reason == "" {
		s.reason = why
	}
	if s.killed {
		return nil
	}
	s.killed = true
	return []syscall.Signal{syscall.SIGKILL}
}

// orphaned is the supervisor's death: stop at once, SIGKILL after K or at
// the fence, whichever is first (GraceEnd already takes the earlier).
func (s *groupState) orphaned(now time.Duration) []syscall.Signal {
	return s.stop(now, s.killSignal, ReasonOrphaned)
}

// exited records the direct child's end. The rest of its group (a shell's
// background jobs, say) is stopped too: a term ends only when the group is.
func (s *groupState) exited(now time.Duration) []syscall.Signal {
	s.childGone = true
	return s.stop(now, s.killSignal, ReasonExited)
}

// reaped records the direct child's exit status, taken when it is reaped,
// once nothing else of its tree is left.
func (s *groupState) reaped(ws syscall.WaitStatus) { s.childExit = &ws }

// tick applies the clock: the fence first, then the end of a grace period.
func (s *groupState) tick(now time.Duration) []syscall.Signal {
	var out []syscall.Signal
	sig, kill := s.fence.Due(now)
	if sig && !s.stopping && !s.killed {
		out = append(out, s.stop(now, s.killSignal, ReasonFenced)...)
	}
	if !s.killed && (kill || (s.stopping && now >= s.graceEnd)) {
		out = append(out, s.kill(ReasonFenced)...)
	}
	return out
}

// exitCode is what the supervisor reports for this group.
func (s *groupState) exitCode() int {
	if s.childExit == nil {
		return exitcode.Signal(syscall.SIGKILL)
	}
	return exitcode.Of(*s.childExit)
}

// signaled reports whether a signal ended the direct child, rather than an
// exit of its own (a shell's exit 130 is no Ctrl-C).
func (s *groupState) signaled() bool {
	return s.childExit != nil && s.childExit.Signaled()
}

// next is the boot-clock time of the next thing tick would do, or 0 when
// nothing is scheduled: the keeper sleeps until then.
func (s *groupState) next() time.Duration {
	if s.killed {
		return 0
	}
	var next time.Duration
	consider := func(t time.Duration) {
		if next == 0 || t < next {
			next = max(t, 1) // 0 would disarm
		}
	}
	if s.stopping {
		consider(s.graceEnd)
	}
	if s.fence.Deadline != 0 {
		if !s.stopping {
			consider(s.fence.SignalAt())
		}
		consider(s.fence.KillAt())
	}
	return next
}

// nextKill is when the next SIGKILL is due, or 0: the fence's SIGKILL
// point, or the end of a stop's grace, until SIGKILL went out.
func (s *groupState) nextKill() time.Duration {
	if s.killed {
		return 0
	}
	var at time.Duration
	if s.fence.Deadline != 0 {
		at = s.fence.KillAt()
	}
	if s.stopping && (at == 0 || s.graceEnd < at) {
		at = max(s.graceEnd, 1)
	}
	return at
}
