package campaign

import (
	"fmt"
	"time"

	"github.com/etcdlead/etcdlead/internal/etcdwire"
)

// Limits on the lease TTL. Below 2 s etcd's own minimum TTL and its 500 ms
// expiry tick leave no room for a fence; above an hour a crashed leader
// blocks its election for longer than anyone would wait.
const (
	MinTTL             = 2 * time.Second
	MaxTTL             = time.Hour
	DefaultTTL         = 15 * time.Second
	DefaultKillTimeout = 5 * time.Second
	minFenceMargin     = 250 * time.Millisecond
	maxRenewInterval   = time.Second
	// MinRenewInterval keeps a renewal interval given by hand from turning
	// the renewals into a stream of requests.
	MinRenewInterval = 100 * time.Millisecond
)

// Timing holds the durations that decide the fence (docs/design.md, "The
// keeper").
type Timing struct {
	TTL         time.Duration // T, as asked; etcd may grant more
	KillTimeout time.Duration // K
	FenceMargin time.Duration // m
	// RenewInterval is the leader's renewal cadence r; 0 means
	// DefaultRenewInterval(T). A longer one costs etcd fewer requests and
	// the leader that much outage tolerance, T - K - m - r: the deadline
	// counts from the last credited send.
	RenewInterval time.Duration
}

// DefaultRenewInterval is the leader's renewal cadence unless one is
// given, r = min(T/10, 1s), and, whatever cadence is given, how long a
// renewal stream may leave a send unanswered before it counts as quiet
// (quietAfter): the stall detector's bound does not follow the cadence.
func DefaultRenewInterval(ttl time.Duration) time.Duration { return min(ttl/10, maxRenewInterval) }

// quietAfter is how long a request with a cadence of its own (a renewal,
// a hedged read, a progress request) may go unanswered before it is sent
// again, to another member if its own went quiet (renewals, "A quiet
// stream"). It is DefaultRenewInterval whatever renewal interval is given,
// so that a leader that renews less often still notices a stalled member
// as soon.
func quietAfter(ttl time.Duration) time.Duration { return DefaultRenewInterval(ttl) }

// waiterRenewEvery is how often a waiting candidate renews its lease:
// T/3, as etcdctl lock's keep-alive does. A waiter holds no fence, so its
// cadence only has to keep the lease alive through one lost renewal; once
// it leads, it renews every r from its last credited send (lead.go).
func waiterRenewEvery(ttl time.Duration) time.Duration { return ttl / 3 }

// recordPoll is how often a wait on an ended term looks again: etcd offers
// no event for a lease's end once its keys are gone, and a hold ends early
// when the term's own end takes its record away.
const recordPoll = 250 * time.Millisecond

// resignPoll is how often WaitSteppedDown asks whether the leader's lease,
// whose key is gone, has ended: etcd tells of no lease's end by an event.
const resignPoll = 100 * time.Millisecond

// waitEvery is how often a term's stream is asked for progress while a
// wait watches on it: T/2 - 5q/2 with q = quietAfter (T/4 up to a TTL of
// 10 s). A stall that begins just before the term ahead ends is noticed
// within T/2 - 3q/2 of it, and the watches re-opened at once, which
// leaves 3q/2 of T/2 for the wake-up's reads and the child's start: a
// handoff during a stall still completes within T/2 of the old child's
// end. A wait asks whether or not the revision moved: its own renewals,
// which would tell, come only every T/3.
func waitEvery(ttl time.Duration) time.Duration { return ttl/2 - 5*quietAfter(ttl)/2 }

// guardFloor is the longest pause between two progress requests on a
// term's stream while only the guard watches on it: T/3 at the default
// TTL.
const guardFloor = 5 * time.Second

// guardEvery is how often the term's stream is asked after while only the
// guard watches on it, T/3 but no less than guardFloor. It bounds how late
// a watch that stalls while its stream lives lets a deleted key or a
// resign request be noticed (a broken or compacted watch is read at once),
// never what runs: a successor still waits for this term's lease itself
// (docs/design.md, step 4). A progress request is a message on the open
// stream, which etcd answers from the member's own state, so at the
// default TTL the guard costs far less than the read it replaces; the
// floor keeps a short TTL from paying for one every few renewals, for a
// double fault (a silent stall, then a delete or a resign) that it makes
// no likelier. A wait on the stream asks more often (waitEvery).
func guardEvery(ttl time.Duration) time.Duration { return max(ttl/3, guardFloor) }

// streamCadence is the cadence of a term's watch stream
// (internal/etcdwire/stall.go). Its stall bound starts at quietAfter, the
// same judgement a renewal stream is held to: an answer needs no raft
// round, only the member itself, and a healthy stream judged stalled
// costs one new stream and the replays of its watches, nothing more. The
// bound never exceeds T/2, the time a handoff may take.
func streamCadence(ttl time.Duration) etcdwire.Cadence {
	return etcdwire.Cadence{Wait: waitEvery(ttl), Guard: guardEvery(ttl), Stall: quietAfter(ttl), Max: ttl / 2}
}

// renew is r: the given renewal interval, or the default.
func (t Timing) renew() time.Duration {
	if t.RenewInterval > 0 {
		return t.RenewInterval
	}
	return DefaultRenewInterval(t.TTL)
}

// DefaultFenceMargin is m = max(250ms, T/20): the keeper's tick, scheduling
// delays and the kill itself must fit in it.
func DefaultFenceMargin(ttl time.Duration) time.Duration { return max(minFenceMargin, ttl/20) }

// TimingField names one of Timing's durations in a TimingError.
type TimingField int

const (
	FieldTTL           TimingField = iota + 1 // Timing.TTL
	FieldKillTimeout                          // Timing.KillTimeout
	FieldFenceMargin                          // Timing.FenceMargin
	FieldRenewInterval                        // Timing.RenewInterval
)

// String names the field in the library's words, as TimingError.Error does.
func (f TimingField) String() string {
	switch f {
	case FieldTTL:
		return "TTL"
	case FieldKillTimeout:
		return "kill timeout"
	case FieldFenceMargin:
		return "fence margin"
	case FieldRenewInterval:
		return "renewal interval"
	}
	return fmt.Sprintf("TimingField(%d)", int(f))
}

// TimingRule is a rule of ResolveTiming that a Timing breaks.
type TimingRule int

const (
	// RuleRange: the TTL is outside MinTTL to MaxTTL, or the renewal
	// interval is below MinRenewInterval.
	RuleRange TimingRule = iota + 1
	// RuleWholeSeconds: the TTL is not a whole number of seconds, and etcd
	// leases count whole seconds.
	RuleWholeSeconds
	// RulePositive: the kill timeout, the fence margin or a given renewal
	// interval is not positive.
	RulePositive
	// RuleFit: K + m + r exceeds 2T/3.
	RuleFit
)

// TimingError is a Timing that ResolveTiming refuses. Error names the
// durations in the library's words; a command line names them by its own
// flags with Format, since the library does not know them.
type TimingError struct {
	Rule TimingRule
	// Field is the duration refused: the TTL or the renewal interval for
	// RuleRange, the TTL for RuleWholeSeconds, the kill timeout, the fence
	// margin or the renewal interval for RulePositive, and for RuleFit the
	// one Suggested changes: a given renewal interval when a shorter one
	// fits, else the TTL when a longer one fits, else the kill timeout or
	// the fence margin.
	Field TimingField
	// Timing holds the durations as ResolveTiming had filled them in when
	// the rule failed (defaults included).
	Timing Timing
	// Suggested is a value for Field that passes the rule, or 0 if the
	// error suggests none: the TTL rounded to whole seconds (RuleWholeSeconds),
	// for RuleFit the longest renewal interval that fits when one was
	// given, else the smallest whole-second TTL that fits K, m and r, or
	// when none does the longest K (else m) that fits the TTL.
	Suggested time.Duration
}

func (e *TimingError) Error() string { return e.Format(TimingField.String) }

// Format is the error's message with each duration named by name: with
// the flags of etcdlead run it reads as the command line's own message.
func (e *TimingError) Format(name func(TimingField) string) string {
	t := e.Timing
	switch e.Rule {
	case RuleRange:
		if e.Field == FieldRenewInterval {
			return fmt.Sprintf("%s %s is too short (each renewal is a request to etcd): use %s or longer", name(e.Field), t.RenewInterval, MinRenewInterval)
		}
		return fmt.Sprintf("%s %s is out of range: use a TTL from %s to %s", name(FieldTTL), t.TTL, MinTTL, MaxTTL)
	case RuleWholeSeconds:
		return fmt.Sprintf("%s %s is not a whole number of seconds (etcd leases count whole seconds): use e.g. %s %s",
			name(FieldTTL), t.TTL, name(FieldTTL), e.Suggested)
	case RulePositive:
		return fmt.Sprintf("%s %s must be positive", name(e.Field), t.value(e.Field))
	case RuleFit:
		over := fmt.Sprintf("%s %s + %s %s + %s %s exceeds 2/3 of %s %s",
			name(FieldKillTimeout), t.KillTimeout, name(FieldFenceMargin), t.FenceMargin, name(FieldRenewInterval), t.renew(),
			name(FieldTTL), t.TTL)
		switch {
		case e.Field == FieldRenewInterval && e.Suggested > 0:
			return fmt.Sprintf("%s: use %s %s or shorter", over, name(FieldRenewInterval), e.Suggested)
		case e.Field == FieldTTL && e.Suggested > 0:
			return fmt.Sprintf("%s: use %s %s or shorter timeouts", over, name(FieldTTL), e.Suggested)
		case e.Suggested > 0:
			return fmt.Sprintf("%s, and no TTL up to %s fits them: use %s %s or shorter", over, MaxTTL, name(e.Field), e.Suggested)
		}
		return fmt.Sprintf("%s, and no TTL up to %s fits them: use shorter timeouts", over, MaxTTL)
	}
	return fmt.Sprintf("%s %s breaks timing rule %d", name(e.Field), t.value(e.Field), int(e.Rule))
}

func (t Timing) value(f TimingField) time.Duration {
	switch f {
	case FieldKillTimeout:
		return t.KillTimeout
	case FieldFenceMargin:
		return t.FenceMargin
	case FieldRenewInterval:
		return t.RenewInterval
	}
	return t.TTL
}

// ResolveTiming fills in defaults and checks the rule
// K + m + r <= 2T/3, which leaves a third of the TTL as the outage a leader
// rides out before its child is stopped, whatever renewal interval is
// given. set names the durations the user gave (the TTL always counts as
// given, and so does a renewal interval other than 0); an unset K is
// shortened to T/4 when 5 s does not fit, and an unset r is
// DefaultRenewInterval(T). A refusal is a *TimingError.
func ResolveTiming(t Timing, set ...TimingField) (Timing, error) {
	killSet, marginSet, renewSet := false, false, t.RenewInterval != 0
	for _, f := range set {
		switch f {
		case FieldKillTimeout:
			killSet = true
		case FieldFenceMargin:
			marginSet = true
		case FieldRenewInterval:
			renewSet = true
		}
	}
	if t.TTL < MinTTL || t.TTL > MaxTTL {
		return t, &TimingError{Rule: RuleRange, Field: FieldTTL, Timing: t}
	}
	if t.TTL%time.Second != 0 {
		return t, &TimingError{Rule: RuleWholeSeconds, Field: FieldTTL, Timing: t, Suggested: t.TTL.Round(time.Second)}
	}
	if renewSet && t.RenewInterval <= 0 {
		return t, &TimingError{Rule: RulePositive, Field: FieldRenewInterval, Timing: t}
	}
	if renewSet && t.RenewInterval < MinRenewInterval {
		return t, &TimingError{Rule: RuleRange, Field: FieldRenewInterval, Timing: t, Suggested: MinRenewInterval}
	}
	t = t.withDefaults(killSet, marginSet)
	if t.KillTimeout <= 0 {
		return t, &TimingError{Rule: RulePositive, Field: FieldKillTimeout, Timing: t}
	}
	if t.FenceMargin <= 0 {
		return t, &TimingError{Rule: RulePositive, Field: FieldFenceMargin, Timing: t}
	}
	if !t.fits() {
		if r := readable(2*t.TTL/3 - t.KillTimeout - t.FenceMargin); renewSet && r >= MinRenewInterval {
			return t, &TimingError{Rule: RuleFit, Field: FieldRenewInterval, Timing: t, Suggested: r}
		}
		if ttl := t.fittingTTL(killSet, marginSet); ttl > 0 {
			return t, &TimingError{Rule: RuleFit, Field: FieldTTL, Timing: t, Suggested: ttl}
		}
		f, d := t.shorter()
		return t, &TimingError{Rule: RuleFit, Field: f, Timing: t, Suggested: d}
	}
	if !renewSet {
		t.RenewInterval = t.renew()
	}
	return t, nil
}

func (t Timing) fits() bool {
	return 3*(t.KillTimeout+t.FenceMargin+t.renew()) <= 2*t.TTL
}

// withDefaults fills in what the user did not set: m from the TTL, and K
// as 5 s, or T/4 when 5 s does not fit.
func (t Timing) withDefaults(killSet, marginSet bool) Timing {
	if !marginSet {
		t.FenceMargin = DefaultFenceMargin(t.TTL)
	}
	if !killSet {
		t.KillTimeout = DefaultKillTimeout
		if !t.fits() {
			t.KillTimeout = t.TTL / 4
		}
	}
	return t
}

// fittingTTL is the smallest whole-second TTL for which the K, m and r the
// user set fit, with defaults for the others as at that TTL; 0 if none.
func (t Timing) fittingTTL(killSet, marginSet bool) time.Duration {
	for ttl := MinTTL; ttl <= MaxTTL; ttl += time.Second {
		c := Timing{TTL: ttl, KillTimeout: t.KillTimeout, FenceMargin: t.FenceMargin, RenewInterval: t.RenewInterval}.withDefaults(killSet, marginSet)
		if c.fits() {
			return ttl
		}
	}
	return 0
}

// shorter is, when no TTL fits, the longest kill timeout that fits this
// TTL and fence margin, else the longest fence margin that fits with this
// kill timeout; rounded down to a readable value. 0 if neither alone does.
func (t Timing) shorter() (TimingField, time.Duration) {
	room := 2*t.TTL - 3*t.renew() // 3(K+m) must not exceed it
	if k := readable((room - 3*t.FenceMargin) / 3); k > 0 {
		return FieldKillTimeout, k
	}
	if m := readable((room - 3*t.KillTimeout) / 3); m > 0 {
		return FieldFenceMargin, m
	}
	return FieldTTL, 0
}

// readable rounds d down to whole seconds, or to 10ms below a second.
func readable(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Truncate(time.Second)
	}
	return d.Truncate(10 * time.Millisecond)
}

// OutageTolerance is how long etcd may be unreachable before the fence stops
// the child: T - K - m - r.
func (t Timing) OutageTolerance() time.Duration {
	return t.TTL - t.KillTimeout - t.FenceMargin - t.renew()
}
