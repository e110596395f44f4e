package cli

import (
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
