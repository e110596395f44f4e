package cli

import (
	"bytes"
	"strings"
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

// Lines are held until released; past the bound they are written after
// all, in order, so a long wait neither grows memory nor loses lines.
func TestHeldLog(t *testing.T) {
	var out bytes.Buffer
	h := &heldLog{out: &out}
	h.Write([]byte("a\n"))
	if out.Len() != 0 {
		t.Fatalf("held line written: %q", out.String())
	}
	h.release(false)
	h.Write([]byte("b\n"))
	if out.String() != "b\n" {
		t.Fatalf("after a dropping release: %q, want only b", out.String())
	}

	out.Reset()
	h = &heldLog{out: &out}
	line := strings.Repeat("x", 1023) + "\n"
	for range heldLimit / len(line) {
		h.Write([]byte(line))
	}
	if out.Len() != 0 {
		t.Fatal("lines written before the bound")
	}
	h.Write([]byte("over\n"))
	if !strings.HasSuffix(out.String(), line+"over\n") || out.Len() != heldLimit+len("over\n") {
		t.Fatalf("past the bound: %d bytes written, want all %d in order", out.Len(), heldLimit+len("over\n"))
	}
	h.release(false) // nothing is held any more
	h.Write([]byte("after\n"))
	if !strings.HasSuffix(out.String(), "over\nafter\n") {
		t.Fatal("a line after the bound was not written at once")
	}
}
