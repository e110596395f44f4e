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

// ResolveTiming fills in defaults and checks the rule
// K + m + r <= 2T/3, which leaves a third of the TTL as the outage a leader
// rides out before its child is stopped. killSet and marginSet say whether the
// user gave K and m; an unset K is shortened to T/4 when 5 s does not fit.
func ResolveTiming(t Timing, killSet, marginSet bool) (Timing, error) {
	if t.TTL < MinTTL || t.TTL > MaxTTL {
		return t, fmt.Errorf("--ttl %s is out of range: use a TTL from %s to %s", t.TTL, MinTTL, MaxTTL)
	}
	if t.TTL%time.Second != 0 {
		return t, fmt.Errorf("--ttl %s is not a whole number of seconds (etcd leases count whole seconds): use e.g. --ttl %s", t.TTL, t.TTL.Round(time.Second))
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
		return t, fmt.Errorf("--kill-timeout %s must be positive", t.KillTimeout)
	}
	if t.FenceMargin <= 0 {
		return t, fmt.Errorf("--fence-margin %s must be positive", t.FenceMargin)
	}
	if !t.fits() {
		return t, fmt.Errorf("--kill-timeout %s + --fence-margin %s + renewal interval %s exceeds 2/3 of --ttl %s: use --ttl %s or shorter timeouts",
			t.KillTimeout, t.FenceMargin, RenewInterval(t.TTL), t.TTL, t.fittingTTL(marginSet))
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
