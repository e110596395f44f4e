package campaign

import (
	"fmt"
	"time"
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
)

// Timing holds the durations that decide the fence (docs/design.md, "The
// keeper").
type Timing struct {
	TTL         time.Duration // T, as asked; etcd may grant more
	KillTimeout time.Duration // K
	FenceMargin time.Duration // m
}

// RenewInterval is the leader's renewal cadence r = min(T/10, 1s), and how
// long a renewal stream may leave a send unanswered before it counts as
// quiet.
func RenewInterval(ttl time.Duration) time.Duration { return min(ttl/10, maxRenewInterval) }

// DefaultFenceMargin is m = max(250ms, T/20): the keeper's tick, scheduling
// delays and the kill itself must fit in it.
func DefaultFenceMargin(ttl time.Duration) time.Duration { return max(minFenceMargin, ttl/20) }

// TimingField names one of Timing's durations in a TimingError.
type TimingField int

const (
	FieldTTL         TimingField = iota + 1 // Timing.TTL
	FieldKillTimeout                        // Timing.KillTimeout
	FieldFenceMargin                        // Timing.FenceMargin
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
	}
	return fmt.Sprintf("TimingField(%d)", int(f))
}

// TimingRule is a rule of ResolveTiming that a Timing breaks.
type TimingRule int

const (
	// RuleRange: the TTL is outside MinTTL to MaxTTL.
	RuleRange TimingRule = iota + 1
	// RuleWholeSeconds: the TTL is not a whole number of seconds, and etcd
	// leases count whole seconds.
	RuleWholeSeconds
	// RulePositive: the kill timeout or the fence margin is not positive.
	RulePositive
	// RuleFit: K + m + r exceeds 2T/3.
	RuleFit
)

// TimingError is a Timing that ResolveTiming refuses. Error names the
// durations in the library's words; a command line names them by its own
// flags with Format, since the library does not know them.
type TimingError struct {
	Rule TimingRule
	// Field is the duration refused: the TTL for RuleRange and
	// RuleWholeSeconds, the kill timeout or the fence margin for
	// RulePositive, and for RuleFit the one Suggested changes: the TTL
	// when a longer one fits, else the kill timeout or the fence margin.
	Field TimingField
	// Timing holds the durations as ResolveTiming had filled them in when
	// the rule failed (defaults included).
	Timing Timing
	// Suggested is a value for Field that passes the rule, or 0 if the
	// error suggests none: the TTL rounded to whole seconds (RuleWholeSeconds),
	// the smallest whole-second TTL that fits K and m (RuleFit), or when
	// none does the longest K (else m) that fits the TTL.
	Suggested time.Duration
}

func (e *TimingError) Error() string { return e.Format(TimingField.String) }

// Format is the error's message with each duration named by name: with
// the flags of etcdlead run it reads as the command line's own message.
func (e *TimingError) Format(name func(TimingField) string) string {
	t := e.Timing
	switch e.Rule {
	case RuleRange:
		return fmt.Sprintf("%s %s is out of range: use a TTL from %s to %s", name(FieldTTL), t.TTL, MinTTL, MaxTTL)
	case RuleWholeSeconds:
		return fmt.Sprintf("%s %s is not a whole number of seconds (etcd leases count whole seconds): use e.g. %s %s",
			name(FieldTTL), t.TTL, name(FieldTTL), e.Suggested)
	case RulePositive:
		return fmt.Sprintf("%s %s must be positive", name(e.Field), t.value(e.Field))
	case RuleFit:
		over := fmt.Sprintf("%s %s + %s %s + renewal interval %s exceeds 2/3 of %s %s",
			name(FieldKillTimeout), t.KillTimeout, name(FieldFenceMargin), t.FenceMargin, RenewInterval(t.TTL),
			name(FieldTTL), t.TTL)
		switch {
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
	}
	return t.TTL
}

// ResolveTiming fills in defaults and checks the rule
// K + m + r <= 2T/3, which leaves a third of the TTL as the outage a leader
// rides out before its child is stopped. killSet and marginSet say whether the
// user gave K and m; an unset K is shortened to T/4 when 5 s does not fit.
// A refusal is a *TimingError.
func ResolveTiming(t Timing, killSet, marginSet bool) (Timing, error) {
	if t.TTL < MinTTL || t.TTL > MaxTTL {
		return t, &TimingError{Rule: RuleRange, Field: FieldTTL, Timing: t}
	}
	if t.TTL%time.Second != 0 {
		return t, &TimingError{Rule: RuleWholeSeconds, Field: FieldTTL, Timing: t, Suggested: t.TTL.Round(time.Second)}
	}
	t = t.withDefaults(killSet, marginSet)
	if t.KillTimeout <= 0 {
		return t, &TimingError{Rule: RulePositive, Field: FieldKillTimeout, Timing: t}
	}
	if t.FenceMargin <= 0 {
		return t, &TimingError{Rule: RulePositive, Field: FieldFenceMargin, Timing: t}
	}
	if !t.fits() {
		if ttl := t.fittingTTL(killSet, marginSet); ttl > 0 {
			return t, &TimingError{Rule: RuleFit, Field: FieldTTL, Timing: t, Suggested: ttl}
		}
		f, d := t.shorter()
		return t, &TimingError{Rule: RuleFit, Field: f, Timing: t, Suggested: d}
	}
	return t, nil
}

func (t Timing) fits() bool {
	return 3*(t.KillTimeout+t.FenceMargin+RenewInterval(t.TTL)) <= 2*t.TTL
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

// fittingTTL is the smallest whole-second TTL for which the K and m the
// user set fit, with defaults for the others as at that TTL; 0 if none.
func (t Timing) fittingTTL(killSet, marginSet bool) time.Duration {
	for ttl := MinTTL; ttl <= MaxTTL; ttl += time.Second {
		c := Timing{TTL: ttl, KillTimeout: t.KillTimeout, FenceMargin: t.FenceMargin}.withDefaults(killSet, marginSet)
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
	room := 2*t.TTL - 3*RenewInterval(t.TTL) // 3(K+m) must not exceed it
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
	return t.TTL - t.KillTimeout - t.FenceMargin - RenewInterval(t.TTL)
}
