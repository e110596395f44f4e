package campaign

import (
	"errors"
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

// flagName names the fields as etcdlead run's flags do: Format with it must
// give the command line's messages byte for byte, which its scripts compare.
func flagName(f TimingField) string {
	return map[TimingField]string{FieldTTL: "--ttl", FieldKillTimeout: "--kill-timeout", FieldFenceMargin: "--fence-margin"}[f]
}

func TestResolveTimingRefusals(t *testing.T) {
	for _, c := range []struct {
		in             Timing
		killSet, mSet  bool
		rule           TimingRule
		field          TimingField
		suggested      time.Duration
		flags, library string
	}{
		{Timing{TTL: 0}, false, false, RuleRange, FieldTTL, 0,
			"--ttl 0s is out of range: use a TTL from 2s to 1h0m0s",
			"TTL 0s is out of range: use a TTL from 2s to 1h0m0s"},
		{Timing{TTL: time.Second}, false, false, RuleRange, FieldTTL, 0,
			"--ttl 1s is out of range: use a TTL from 2s to 1h0m0s",
			"TTL 1s is out of range: use a TTL from 2s to 1h0m0s"},
		{Timing{TTL: 1500 * time.Millisecond}, false, false, RuleRange, FieldTTL, 0,
			"--ttl 1.5s is out of range: use a TTL from 2s to 1h0m0s",
			"TTL 1.5s is out of range: use a TTL from 2s to 1h0m0s"},
		{Timing{TTL: 2500 * time.Millisecond}, false, false, RuleWholeSeconds, FieldTTL, 3 * time.Second,
			"--ttl 2.5s is not a whole number of seconds (etcd leases count whole seconds): use e.g. --ttl 3s",
			"TTL 2.5s is not a whole number of seconds (etcd leases count whole seconds): use e.g. TTL 3s"},
		{Timing{TTL: 15*time.Second + 1}, false, false, RuleWholeSeconds, FieldTTL, 15 * time.Second,
			"--ttl 15.000000001s is not a whole number of seconds (etcd leases count whole seconds): use e.g. --ttl 15s",
			"TTL 15.000000001s is not a whole number of seconds (etcd leases count whole seconds): use e.g. TTL 15s"},
		{Timing{TTL: 2 * time.Hour}, false, false, RuleRange, FieldTTL, 0,
			"--ttl 2h0m0s is out of range: use a TTL from 2s to 1h0m0s",
			"TTL 2h0m0s is out of range: use a TTL from 2s to 1h0m0s"},
		{Timing{TTL: 100000 * time.Hour}, false, false, RuleRange, FieldTTL, 0,
			"--ttl 100000h0m0s is out of range: use a TTL from 2s to 1h0m0s",
			"TTL 100000h0m0s is out of range: use a TTL from 2s to 1h0m0s"},
		// K=5s given with T=6s: 5+0.3+0.6 > 4. At 9s 5+0.45+0.9 > 6; 10s fits.
		{Timing{TTL: 6 * time.Second, KillTimeout: 5 * time.Second}, true, false, RuleFit, FieldTTL, 10 * time.Second,
			"--kill-timeout 5s + --fence-margin 300ms + renewal interval 600ms exceeds 2/3 of --ttl 6s: use --ttl 10s or shorter timeouts",
			"kill timeout 5s + fence margin 300ms + renewal interval 600ms exceeds 2/3 of TTL 6s: use TTL 10s or shorter timeouts"},
		{Timing{TTL: 15 * time.Second, KillTimeout: 0}, true, false, RulePositive, FieldKillTimeout, 0,
			"--kill-timeout 0s must be positive",
			"kill timeout 0s must be positive"},
		{Timing{TTL: 15 * time.Second, KillTimeout: -time.Second}, true, false, RulePositive, FieldKillTimeout, 0,
			"--kill-timeout -1s must be positive",
			"kill timeout -1s must be positive"},
		{Timing{TTL: 15 * time.Second, KillTimeout: time.Second, FenceMargin: -time.Millisecond}, true, true, RulePositive, FieldFenceMargin, 0,
			"--fence-margin -1ms must be positive",
			"fence margin -1ms must be positive"},
		// An unset K falls back to T/4 and is named with its value all the
		// same; the fitting TTL keeps the given m, and takes the unset K as
		// it would be at that TTL: at 38s neither 5s nor T/4 fits, at 39s
		// 5s does.
		{Timing{TTL: 15 * time.Second, FenceMargin: 20 * time.Second}, false, true, RuleFit, FieldTTL, 39 * time.Second,
			"--kill-timeout 3.75s + --fence-margin 20s + renewal interval 1s exceeds 2/3 of --ttl 15s: use --ttl 39s or shorter timeouts",
			"kill timeout 3.75s + fence margin 20s + renewal interval 1s exceeds 2/3 of TTL 15s: use TTL 39s or shorter timeouts"},
		// No TTL fits a kill timeout of 39m: the longest that fits 1h,
		// with its default margin of 3m and r = 1s, is suggested, not the
		// TTL already given.
		{Timing{TTL: time.Hour, KillTimeout: 39 * time.Minute}, true, false, RuleFit, FieldKillTimeout, 36*time.Minute + 59*time.Second,
			"--kill-timeout 39m0s + --fence-margin 3m0s + renewal interval 1s exceeds 2/3 of --ttl 1h0m0s, and no TTL up to 1h0m0s fits them: use --kill-timeout 36m59s or shorter",
			"kill timeout 39m0s + fence margin 3m0s + renewal interval 1s exceeds 2/3 of TTL 1h0m0s, and no TTL up to 1h0m0s fits them: use kill timeout 36m59s or shorter"},
		// A fence margin that leaves no room for any kill timeout.
		{Timing{TTL: time.Hour, KillTimeout: time.Second, FenceMargin: 40 * time.Minute}, true, true, RuleFit, FieldFenceMargin, 39*time.Minute + 58*time.Second,
			"--kill-timeout 1s + --fence-margin 40m0s + renewal interval 1s exceeds 2/3 of --ttl 1h0m0s, and no TTL up to 1h0m0s fits them: use --fence-margin 39m58s or shorter",
			"kill timeout 1s + fence margin 40m0s + renewal interval 1s exceeds 2/3 of TTL 1h0m0s, and no TTL up to 1h0m0s fits them: use fence margin 39m58s or shorter"},
	} {
		_, err := ResolveTiming(c.in, c.killSet, c.mSet)
		var te *TimingError
		if !errors.As(err, &te) {
			t.Errorf("ResolveTiming(%+v) = %v, want a *TimingError", c.in, err)
			continue
		}
		if te.Rule != c.rule || te.Field != c.field || te.Suggested != c.suggested {
			t.Errorf("ResolveTiming(%+v): rule %d, field %s, suggested %s; want %d, %s, %s",
				c.in, te.Rule, te.Field, te.Suggested, c.rule, c.field, c.suggested)
		}
		if got := te.Format(flagName); got != c.flags {
			t.Errorf("ResolveTiming(%+v) with flag names:\n got %q\nwant %q", c.in, got, c.flags)
		}
		if got := err.Error(); got != c.library {
			t.Errorf("ResolveTiming(%+v).Error():\n got %q\nwant %q", c.in, got, c.library)
		}
		if te.Rule == RuleFit && te.Suggested > 0 {
			fixed := c.in
			switch te.Field {
			case FieldTTL:
				fixed.TTL = te.Suggested
			case FieldKillTimeout:
				fixed.KillTimeout = te.Suggested
			case FieldFenceMargin:
				fixed.FenceMargin = te.Suggested
			}
			if _, err := ResolveTiming(fixed, c.killSet, c.mSet); err != nil {
				t.Errorf("ResolveTiming(%+v): the suggestion does not fit: %v", c.in, err)
			}
		}
		if strings.Contains(err.Error(), "--") {
			t.Errorf("ResolveTiming(%+v).Error() = %q names a flag", c.in, err)
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
