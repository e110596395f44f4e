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

// RenewInterval is the leader's renewal cadence r = min(T/10, 1s); each
// attempt is also bounded by r.
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
	// RulePositive, and for RuleFit the TTL, the one Suggested changes.
	Field TimingField
	// Timing holds the durations as ResolveTiming had filled them in when
	// the rule failed (defaults included).
	Timing Timing
	// Suggested is a value for Field that passes the rule, or 0 if the
	// error suggests none: the TTL rounded to whole seconds (RuleWholeSeconds),
	// the smallest whole-second TTL that fits K and m (RuleFit).
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
		return fmt.Sprintf("%s %s + %s %s + renewal interval %s exceeds 2/3 of %s %s: use %s %s or shorter timeouts",
			name(FieldKillTimeout), t.KillTimeout, name(FieldFenceMargin), t.FenceMargin, RenewInterval(t.TTL),
			name(FieldTTL), t.TTL, name(FieldTTL), e.Suggested)
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
	if !marginSet {
		t.FenceMargin = DefaultFenceMargin(t.TTL)
	}
	if !killSet {
		t.KillTimeout = DefaultKillTimeout
		if !t.fits() {
			t.KillTimeout = t.TTL / 4
		}
	}
	if t.KillTimeout <= 0 {
		return t, &TimingError{Rule: RulePositive, Field: FieldKillTimeout, Timing: t}
	}
	if t.FenceMargin <= 0 {
		return t, &TimingError{Rule: RulePositive, Field: FieldFenceMargin, Timing: t}
	}
	if !t.fits() {
		return t, &TimingError{Rule: RuleFit, Field: FieldTTL, Timing: t, Suggested: t.fittingTTL(marginSet)}
	}
	return t, nil
}

func (t Timing) fits() bool {
	return 3*(t.KillTimeout+t.FenceMargin+RenewInterval(t.TTL)) <= 2*t.TTL
}

// fittingTTL is the smallest whole-second TTL for which the given K (and m,
// if the user set it) fit.
func (t Timing) fittingTTL(marginSet bool) time.Duration {
	for ttl := MinTTL; ttl <= MaxTTL; ttl += time.Second {
		c := Timing{TTL: ttl, KillTimeout: t.KillTimeout, FenceMargin: t.FenceMargin}
		if !marginSet {
			c.FenceMargin = DefaultFenceMargin(ttl)
		}
		if c.fits() {
			return ttl
		}
	}
	return MaxTTL
}

// OutageTolerance is how long etcd may be unreachable before the fence stops
// the child: T - K - m - r.
func (t Timing) OutageTolerance() time.Duration {
	return t.TTL - t.KillTimeout - t.FenceMargin - RenewInterval(t.TTL)
}
