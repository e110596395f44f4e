package cli

import (
	"fmt"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"15": 15 * time.Second, "0": 0, "0.5": 500 * time.Millisecond, "15s": 15 * time.Second,
		"1m30s": 90 * time.Second, "-1": -time.Second, " 2 ": 2 * time.Second,
	} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "15x", "1e3", "inf", "NaN", "0x10", "1.2.3", "99999999999999"} {
		if d, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) = %v, want an error", in, d)
		}
	}
}

func TestSuggest(t *testing.T) {
	names := []string{"endpoints", "election", "prefix", "ttl", "timeout", "id"}
	for typed, want := range map[string]string{
		"endpoint": "endpoints", "electon": "election", "prefx": "prefix", "tll": "ttl",
		"nope": "", "e": "", "ti": "", // too far, or as close to two names
	} {
		if got := suggest(typed, names); got != want {
			t.Errorf("suggest(%q) = %q, want %q", typed, got, want)
		}
	}
}

// TestDialTimeoutFromEtcdctl: ETCDCTL_DIAL_TIMEOUT is read as the other
// ETCDCTL_* connection variables are, parsed as --dial-timeout is; the
// flag, then ETCDLEAD_DIAL_TIMEOUT, win over it.
func TestDialTimeoutFromEtcdctl(t *testing.T) {
	unsetenv(t, envDialTimeout)
	for _, c := range []struct {
		etcdlead, etcdctl string
		args              []string
		want              time.Duration
		err               string
	}{
		{etcdctl: "7s", want: 7 * time.Second},
		{etcdctl: "3", want: 3 * time.Second},
		{etcdctl: "7s", etcdlead: "3s", want: 3 * time.Second},
		{etcdctl: "7s", args: []string{"--dial-timeout=2s"}, want: 2 * time.Second},
		{etcdctl: "soon", args: []string{"--dial-timeout=2s"}, want: 2 * time.Second},
		{etcdctl: "soon", err: `ETCDCTL_DIAL_TIMEOUT="soon" is not a duration: use e.g. 15s, 1m30s, or 15 for seconds`},
	} {
		t.Setenv(envEtcdctlDialTimeout, c.etcdctl)
		if c.etcdlead != "" {
			t.Setenv(envDialTimeout, c.etcdlead)
		} else {
			unsetenv(t, envDialTimeout)
		}
		rc, err := parseRunArgs(c.args)
		what := fmt.Sprintf("ETCDCTL_DIAL_TIMEOUT=%s ETCDLEAD_DIAL_TIMEOUT=%s %q", c.etcdctl, c.etcdlead, c.args)
		if c.err != "" {
			checkRefusal(t, what, err, c.err)
			continue
		}
		if err != nil || rc.conn.DialTimeout != c.want {
			t.Errorf("%s: dial timeout %s, %v; want %s", what, rc.conn.DialTimeout, err, c.want)
		}
	}
}

// TestOptionGivenOnEitherSide: a connection flag may come before the
// subcommand or after it, where it wins; given finds either.
func TestOptionGivenOnEitherSide(t *testing.T) {
	unsetenv(t, envDialTimeout)
	unsetenv(t, envEtcdctlDialTimeout)
	for _, c := range []struct {
		global, args []string
		want         time.Duration
	}{
		{want: defaultDialTimeout},
		{global: []string{"--dial-timeout=2s"}, want: 2 * time.Second},
		{args: []string{"--dial-timeout=3s"}, want: 3 * time.Second},
		{global: []string{"--dial-timeout=2s"}, args: []string{"--dial-timeout=3s"}, want: 3 * time.Second},
	} {
		rc, err := parseArgs(c.global, c.args)
		if err != nil || rc.conn.DialTimeout != c.want {
			t.Errorf("%q run %q: dial timeout %s, %v; want %s", c.global, c.args, rc.conn.DialTimeout, err, c.want)
		}
	}
}
