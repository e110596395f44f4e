package campaign

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/bootclock"
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
		got, err := ResolveTiming(Timing{TTL: c.ttl, KillTimeout: DefaultKillTimeout})
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
	return map[TimingField]string{FieldTTL: "--ttl", FieldKillTimeout: "--kill-timeout", FieldFenceMargin: "--fence-margin",
		FieldRenewInterval: "--renew-interval"}[f]
}

func TestResolveTimingRefusals(t *testing.T) {
	for _, c := range []struct {
		in             Timing
		set            []TimingField
		rule           TimingRule
		field          TimingField
		suggested      time.Duration
		flags, library string
	}{
		{Timing{TTL: 0}, nil, RuleRange, FieldTTL, 0,
			"--ttl 0s is out of range: use a TTL from 2s to 1h0m0s",
			"TTL 0s is out of range: use a TTL from 2s to 1h0m0s"},
		{Timing{TTL: time.Second}, nil, RuleRange, FieldTTL, 0,
			"--ttl 1s is out of range: use a TTL from 2s to 1h0m0s",
			"TTL 1s is out of range: use a TTL from 2s to 1h0m0s"},
		{Timing{TTL: 1500 * time.Millisecond}, nil, RuleRange, FieldTTL, 0,
			"--ttl 1.5s is out of range: use a TTL from 2s to 1h0m0s",
			"TTL 1.5s is out of range: use a TTL from 2s to 1h0m0s"},
		{Timing{TTL: 2500 * time.Millisecond}, nil, RuleWholeSeconds, FieldTTL, 3 * time.Second,
			"--ttl 2.5s is not a whole number of seconds (etcd leases count whole seconds): use e.g. --ttl 3s",
			"TTL 2.5s is not a whole number of seconds (etcd leases count whole seconds): use e.g. TTL 3s"},
		{Timing{TTL: 15*time.Second + 1}, nil, RuleWholeSeconds, FieldTTL, 15 * time.Second,
			"--ttl 15.000000001s is not a whole number of seconds (etcd leases count whole seconds): use e.g. --ttl 15s",
			"TTL 15.000000001s is not a whole number of seconds (etcd leases count whole seconds): use e.g. TTL 15s"},
		{Timing{TTL: 2 * time.Hour}, nil, RuleRange, FieldTTL, 0,
			"--ttl 2h0m0s is out of range: use a TTL from 2s to 1h0m0s",
			"TTL 2h0m0s is out of range: use a TTL from 2s to 1h0m0s"},
		{Timing{TTL: 100000 * time.Hour}, nil, RuleRange, FieldTTL, 0,
			"--ttl 100000h0m0s is out of range: use a TTL from 2s to 1h0m0s",
			"TTL 100000h0m0s is out of range: use a TTL from 2s to 1h0m0s"},
		// K=5s given with T=6s: 5+0.3+0.6 > 4. At 9s 5+0.45+0.9 > 6; 10s fits.
		{Timing{TTL: 6 * time.Second, KillTimeout: 5 * time.Second}, []TimingField{FieldKillTimeout}, RuleFit, FieldTTL, 10 * time.Second,
			"--kill-timeout 5s + --fence-margin 300ms + --renew-interval 600ms exceeds 2/3 of --ttl 6s: use --ttl 10s or shorter timeouts",
			"kill timeout 5s + fence margin 300ms + renewal interval 600ms exceeds 2/3 of TTL 6s: use TTL 10s or shorter timeouts"},
		{Timing{TTL: 15 * time.Second, KillTimeout: 0}, []TimingField{FieldKillTimeout}, RulePositive, FieldKillTimeout, 0,
			"--kill-timeout 0s must be positive",
			"kill timeout 0s must be positive"},
		{Timing{TTL: 15 * time.Second, KillTimeout: -time.Second}, []TimingField{FieldKillTimeout}, RulePositive, FieldKillTimeout, 0,
			"--kill-timeout -1s must be positive",
			"kill timeout -1s must be positive"},
		{Timing{TTL: 15 * time.Second, KillTimeout: time.Second, FenceMargin: -time.Millisecond}, []TimingField{FieldKillTimeout, FieldFenceMargin}, RulePositive, FieldFenceMargin, 0,
			"--fence-margin -1ms must be positive",
			"fence margin -1ms must be positive"},
		// An unset K falls back to T/4 and is named with its value all the
		// same; the fitting TTL keeps the given m, and takes the unset K as
		// it would be at that TTL: at 38s neither 5s nor T/4 fits, at 39s
		// 5s does.
		{Timing{TTL: 15 * time.Second, FenceMargin: 20 * time.Second}, []TimingField{FieldFenceMargin}, RuleFit, FieldTTL, 39 * time.Second,
			"--kill-timeout 3.75s + --fence-margin 20s + --renew-interval 1s exceeds 2/3 of --ttl 15s: use --ttl 39s or shorter timeouts",
			"kill timeout 3.75s + fence margin 20s + renewal interval 1s exceeds 2/3 of TTL 15s: use TTL 39s or shorter timeouts"},
		// No TTL fits a kill timeout of 39m: the longest that fits 1h,
		// with its default margin of 3m and r = 1s, is suggested, not the
		// TTL already given.
		{Timing{TTL: time.Hour, KillTimeout: 39 * time.Minute}, []TimingField{FieldKillTimeout}, RuleFit, FieldKillTimeout, 36*time.Minute + 59*time.Second,
			"--kill-timeout 39m0s + --fence-margin 3m0s + --renew-interval 1s exceeds 2/3 of --ttl 1h0m0s, and no TTL up to 1h0m0s fits them: use --kill-timeout 36m59s or shorter",
			"kill timeout 39m0s + fence margin 3m0s + renewal interval 1s exceeds 2/3 of TTL 1h0m0s, and no TTL up to 1h0m0s fits them: use kill timeout 36m59s or shorter"},
		// A fence margin that leaves no room for any kill timeout.
		{Timing{TTL: time.Hour, KillTimeout: time.Second, FenceMargin: 40 * time.Minute}, []TimingField{FieldKillTimeout, FieldFenceMargin}, RuleFit, FieldFenceMargin, 39*time.Minute + 58*time.Second,
			"--kill-timeout 1s + --fence-margin 40m0s + --renew-interval 1s exceeds 2/3 of --ttl 1h0m0s, and no TTL up to 1h0m0s fits them: use --fence-margin 39m58s or shorter",
			"kill timeout 1s + fence margin 40m0s + renewal interval 1s exceeds 2/3 of TTL 1h0m0s, and no TTL up to 1h0m0s fits them: use fence margin 39m58s or shorter"},
		// A renewal interval given by hand: zero and negative are refused
		// (zero only when given: unset, it is the default), and so is one
		// that would make the renewals a stream of requests.
		{Timing{TTL: 15 * time.Second}, []TimingField{FieldRenewInterval}, RulePositive, FieldRenewInterval, 0,
			"--renew-interval 0s must be positive",
			"renewal interval 0s must be positive"},
		{Timing{TTL: 15 * time.Second, RenewInterval: -time.Second}, nil, RulePositive, FieldRenewInterval, 0,
			"--renew-interval -1s must be positive",
			"renewal interval -1s must be positive"},
		{Timing{TTL: 15 * time.Second, RenewInterval: 50 * time.Millisecond}, nil, RuleRange, FieldRenewInterval, MinRenewInterval,
			"--renew-interval 50ms is too short (each renewal is a request to etcd): use 100ms or longer",
			"renewal interval 50ms is too short (each renewal is a request to etcd): use 100ms or longer"},
		// One too long for the TTL: the longest that fits is suggested,
		// not a longer TTL. With K given, 10s - 5s - 750ms, rounded down;
		// with K unset, K falls back to T/4 and 10s - 3.75s - 750ms.
		{Timing{TTL: 15 * time.Second, KillTimeout: 5 * time.Second, RenewInterval: 9 * time.Second},
			[]TimingField{FieldKillTimeout, FieldRenewInterval}, RuleFit, FieldRenewInterval, 4 * time.Second,
			"--kill-timeout 5s + --fence-margin 750ms + --renew-interval 9s exceeds 2/3 of --ttl 15s: use --renew-interval 4s or shorter",
			"kill timeout 5s + fence margin 750ms + renewal interval 9s exceeds 2/3 of TTL 15s: use renewal interval 4s or shorter"},
		{Timing{TTL: 15 * time.Second, RenewInterval: 9 * time.Second}, []TimingField{FieldRenewInterval}, RuleFit, FieldRenewInterval, 5 * time.Second,
			"--kill-timeout 3.75s + --fence-margin 750ms + --renew-interval 9s exceeds 2/3 of --ttl 15s: use --renew-interval 5s or shorter",
			"kill timeout 3.75s + fence margin 750ms + renewal interval 9s exceeds 2/3 of TTL 15s: use renewal interval 5s or shorter"},
		// When no renewal interval of 100ms or more fits, a TTL is
		// suggested, the given interval kept: at 2s, 1.33s - 1.2s - 250ms
		// leaves none; at 3s, K 1.2s + m 250ms + r 100ms fits 2s.
		{Timing{TTL: 2 * time.Second, KillTimeout: 1200 * time.Millisecond, RenewInterval: 100 * time.Millisecond},
			[]TimingField{FieldKillTimeout}, RuleFit, FieldTTL, 3 * time.Second,
			"--kill-timeout 1.2s + --fence-margin 250ms + --renew-interval 100ms exceeds 2/3 of --ttl 2s: use --ttl 3s or shorter timeouts",
			"kill timeout 1.2s + fence margin 250ms + renewal interval 100ms exceeds 2/3 of TTL 2s: use TTL 3s or shorter timeouts"},
	} {
		_, err := ResolveTiming(c.in, c.set...)
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
			case FieldRenewInterval:
				fixed.RenewInterval = te.Suggested
			}
			if _, err := ResolveTiming(fixed, c.set...); err != nil {
				t.Errorf("ResolveTiming(%+v): the suggestion does not fit: %v", c.in, err)
			}
		}
		if strings.Contains(err.Error(), "--") {
			t.Errorf("ResolveTiming(%+v).Error() = %q names a flag", c.in, err)
		}
	}
}

// A renewal interval given by hand is kept, and the outage tolerance
// shrinks by as much as it grows; an unset one resolves to the default,
// so that Timing says which cadence the leader keeps. An unset K still
// falls back to T/4 when 5s no longer fits beside it.
func TestResolveTimingRenewInterval(t *testing.T) {
	for _, c := range []struct {
		in                          Timing
		set                         []TimingField
		wantR, wantK, wantTolerance time.Duration
	}{
		{Timing{TTL: 15 * time.Second}, nil, time.Second, 5 * time.Second, 8250 * time.Millisecond},
		{Timing{TTL: 15 * time.Second, RenewInterval: 4 * time.Second}, []TimingField{FieldRenewInterval},
			4 * time.Second, 5 * time.Second, 5250 * time.Millisecond},
		{Timing{TTL: 15 * time.Second, RenewInterval: 5 * time.Second}, nil,
			5 * time.Second, 3750 * time.Millisecond, 5500 * time.Millisecond},
		{Timing{TTL: 15 * time.Second, RenewInterval: 500 * time.Millisecond}, nil,
			500 * time.Millisecond, 5 * time.Second, 8750 * time.Millisecond},
		{Timing{TTL: 2 * time.Second}, nil, 200 * time.Millisecond, 500 * time.Millisecond, 1050 * time.Millisecond},
	} {
		got, err := ResolveTiming(c.in, c.set...)
		if err != nil {
			t.Errorf("%+v: %v", c.in, err)
			continue
		}
		if got.RenewInterval != c.wantR || got.KillTimeout != c.wantK || got.OutageTolerance() != c.wantTolerance {
			t.Errorf("%+v: r=%s K=%s tolerance=%s, want %s %s %s", c.in,
				got.RenewInterval, got.KillTimeout, got.OutageTolerance(), c.wantR, c.wantK, c.wantTolerance)
		}
	}
}

func TestRenewInterval(t *testing.T) {
	if got := DefaultRenewInterval(2 * time.Second); got != 200*time.Millisecond {
		t.Errorf("r(2s) = %s", got)
	}
	if got := DefaultRenewInterval(time.Minute); got != time.Second {
		t.Errorf("r(1m) = %s, want the 1s cap", got)
	}
}

// K + m + r = 2T/3 exactly fits; a nanosecond more does not (a "<" for
// "<=" slip, or the reverse, fails here).
func TestResolveTimingBoundary(t *testing.T) {
	const ttl, m = 15 * time.Second, 750 * time.Millisecond
	k := 2*ttl/3 - m - DefaultRenewInterval(ttl) // 8.25s
	if _, err := ResolveTiming(Timing{TTL: ttl, KillTimeout: k, FenceMargin: m}, FieldKillTimeout, FieldFenceMargin); err != nil {
		t.Errorf("K %s + m %s + r %s = 2T/3 exactly: %v, want accepted", k, m, DefaultRenewInterval(ttl), err)
	}
	if _, err := ResolveTiming(Timing{TTL: ttl, KillTimeout: k + 1, FenceMargin: m}, FieldKillTimeout, FieldFenceMargin); err == nil {
		t.Errorf("K %s + m %s + r %s is a nanosecond over 2T/3: accepted, want refused", k+1, m, DefaultRenewInterval(ttl))
	}
}

// New takes a renewal interval of 0 (the default) or one of at least
// MinRenewInterval, as ResolveTiming does: a library caller cannot set the
// leader renewing in a stream of requests either.
func TestNewRenewInterval(t *testing.T) {
	cli := clientv3.NewCtxClient(context.Background())
	defer cli.Close()
	l, err := NewLayout("test/", "renew")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		r  time.Duration
		ok bool
	}{{0, true}, {MinRenewInterval, true}, {4 * time.Second, true}, {MinRenewInterval - 1, false}, {-time.Second, false}} {
		_, err := New(Config{Client: cli, Layout: l, ID: "c", Timing: Timing{TTL: 15 * time.Second, RenewInterval: c.r}, Now: bootclock.Now})
		if (err == nil) != c.ok {
			t.Errorf("New with RenewInterval %s: %v, want accepted %v", c.r, err, c.ok)
		}
	}
}
