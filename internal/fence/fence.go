// Package fence is the arithmetic of the fence (docs/design.md, "The
// keeper"), in one place for the three that use it: the campaign, which
// refuses to start a child past the fence point and tells the keeper when
// the deadline moved, and the two fencers, the keeper and the supervisor.
// It runs in the supervisor and in each keeper process.
package fence

import "time"

// Fence is the fence of one term. Deadline is the time, on the boot clock,
// before which etcd cannot have expired the lease: the send time of the
// last successful renewal plus the granted TTL.
type Fence struct {
	Deadline    time.Duration // 0: no deadline known (never fence)
	KillTimeout time.Duration // K
	Margin      time.Duration // m
}

// SignalAt is when the kill signal must reach the group so that a child that
// honours it has K to exit before SIGKILL.
func (f Fence) SignalAt() time.Duration { return f.Deadline - f.KillTimeout - f.Margin }

// KillAt is when the group is SIGKILLed, m before etcd could expire the lease.
func (f Fence) KillAt() time.Duration { return f.Deadline - f.Margin }

// Due reports whether the fence has to act at now.
func (f Fence) Due(now time.Duration) (signal, kill bool) {
	if f.Deadline == 0 {
		return false, false
	}
	return now >= f.SignalAt(), now >= f.KillAt()
}

// GraceEnd is when a stop that starts at now escalates to SIGKILL: after K,
// but never later than the fence allows.
func (f Fence) GraceEnd(now time.Duration) time.Duration {
	end := now + f.KillTimeout
	if f.Deadline != 0 && f.KillAt() < end {
		end = f.KillAt()
	}
	return end
}

// Past reports whether the fence point, SignalAt, is at or before now: a
// child started then could not be stopped in order before the lease may
// end.
func (f Fence) Past(now time.Duration) bool { return now >= f.SignalAt() }

// MoveTo moves the deadline to d if d is later: renewals only push it
// later, and an older one that arrives late must not pull it back.
func (f *Fence) MoveTo(d time.Duration) {
	if d > f.Deadline {
		f.Deadline = d
	}
}
