package campaign

import (
	"strings"
	"testing"
	"time"
)

func TestResolveTimingDefaults(t *testing.T) {
	for _, c := range []struct {
		ttl, wantK, wantM, wantTolerance time.Duration
	}{
		{15 * time.Second, 5 * time.Second, 750 * time.Millisecond, 8250 * time.Millisecond},
		{10 * time.Second, 5 * time.Second, 500 * time.Millisecond, 3500 * time.Millisecond},
		// 5s no longer fits 2T/3: K falls back to T/4.
		{9 * time.Second, 2250 * time.Millisecond, 450 * time.Millisecond, 5400 * time.Millisecond},
		{2 * time.Second, 500 * time.Millisecond, 250 * time.Millisecond, 1050 * time.Millisecond},
		{time.Hour, 5 * time.Second, 180 * time.Second, time.Hour - 186*time.Second},
	} {
		got, err := ResolveTiming(Timing{TTL: c.ttl, KillTimeout: DefaultKillTimeout}, false, false)
		if err != nil {
			t.Errorf("ttl %s: %v", c.ttl, err)
			continue
		}
		if got.KillTimeout != c.wantK || got.FenceMargin != c.wantM || got.OutageTolerance() != c.wantTolerance {
			t.Errorf("ttl %s: K=%s m=%s tolerance=%s, want %s %s %s", c.ttl,
				got.KillTimeout, got.FenceMargin, got.OutageTolerance(), c.wantK, c.wantM, c.wantTolerance)
		}
	}
}

func TestResolveTimingRefusals(t *testing.T) {
	for _, c := range []struct {
		in               Timing
		killSet, mSet    bool
		wantErrSubstring string
	}{
		{Timing{TTL: 0}, false, false, "out of range"},
		{Timing{TTL: time.Second}, false, false, "out of range"},
		{Timing{TTL: 1500 * time.Millisecond}, false, false, "out of range"},
		{Timing{TTL: 2500 * time.Millisecond}, false, false, "whole number of seconds"},
		{Timing{TTL: 2 * time.Hour}, false, false, "out of range"},
		{Timing{TTL: 100000 * time.Hour}, false, false, "out of range"},
		// K=5s given with T=6s: 5+0.3+0.6 > 4. At 9s 5+0.45+0.9 > 6; 10s fits.
		{Timing{TTL: 6 * time.Second, KillTimeout: 5 * time.Second}, true, false, "use --ttl 10s"},
		{Timing{TTL: 15 * time.Second, KillTimeout: 0}, true, false, "must be positive"},
		{Timing{TTL: 15 * time.Second, FenceMargin: 20 * time.Second}, false, true, "exceeds 2/3"},
	} {
		_, err := ResolveTiming(c.in, c.killSet, c.mSet)
		if err == nil || !strings.Contains(err.Error(), c.wantErrSubstring) {
			t.Errorf("ResolveTiming(%+v) = %v, want error with %q", c.in, err, c.wantErrSubstring)
		}
	}
}

func TestRenewInterval(t *testing.T) {
	if got := RenewInterval(2 * time.Second); got != 200*time.Millisecond {
		t.Errorf("r(2s) = %s", got)
	}
	if got := RenewInterval(time.Minute); got != time.Second {
		t.Errorf("r(1m) = %s, want the 1s cap", got)
	}
}

// K + m + r = 2T/3 exactly fits; a nanosecond more does not (a "<" for
// "<=" slip, or the reverse, fails here).
func TestResolveTimingBoundary(t *testing.T) {
	const ttl, m = 15 * time.Second, 750 * time.Millisecond
	k := 2*ttl/3 - m - RenewInterval(ttl) // 8.25s
	if _, err := ResolveTiming(Timing{TTL: ttl, KillTimeout: k, FenceMargin: m}, true, true); err != nil {
		t.Errorf("K %s + m %s + r %s = 2T/3 exactly: %v, want accepted", k, m, RenewInterval(ttl), err)
	}
	if _, err := ResolveTiming(Timing{TTL: ttl, KillTimeout: k + 1, FenceMargin: m}, true, true); err == nil {
		t.Errorf("K %s + m %s + r %s is a nanosecond over 2T/3: accepted, want refused", k+1, m, RenewInterval(ttl))
	}
}
