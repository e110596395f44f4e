package logbuf

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// logged runs f on a logger of this package in the given format and
// returns the lines it wrote.
func logged(t *testing.T, jsonFormat bool, f func(hclog.Logger)) []string {
	t.Helper()
	var b bytes.Buffer
	w := New(&b, 0)
	f(logger(w, hclog.LoggerOptions{Name: "etcdlead", JSONFormat: jsonFormat}))
	if !w.Flush(safety) {
		t.Fatal("Flush timed out")
	}
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

func hostile(log hclog.Logger) {
	err := errors.New("etcd said:\nMAINPID=1\x1b[2J")
	log.Info("starting", "ttl", 15*time.Second, "id", "web-1\n[ERROR] forged")
	log.Named("campaign").With("fence_margin", 750*time.Millisecond).Warn("renewal failed", "error", err)
	log.Warn("a message\nthat is two", "kill_timeout", 5*time.Second)
}

// Text: one line per record, whatever the values hold; durations as 15s.
func TestTextRecordsAreOneLineEach(t *testing.T) {
	lines := logged(t, false, hostile)
	if len(lines) != 3 {
		t.Fatalf("3 records took %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, want := range []string{`ttl=15s`, `id="web-1\n[ERROR] forged"`, `fence_margin=750ms`,
		`error="etcd said:\nMAINPID=1\x1b[2J"`, `"a message\nthat is two"`, `kill_timeout=5s`} {
		if !strings.Contains(strings.Join(lines, "\n"), want) {
			t.Errorf("no %s in:\n%s", want, strings.Join(lines, "\n"))
		}
	}
	for _, l := range lines {
		if strings.ContainsRune(l, 0x1b) {
			t.Errorf("an escape sequence reached the log raw: %q", l)
		}
	}
}

// JSON: every line an object, durations as strings.
func TestJSONDurationsAsStrings(t *testing.T) {
	lines := logged(t, true, hostile)
	want := []map[string]string{{"ttl": "15s"}, {"fence_margin": "750ms"}, {"kill_timeout": "5s"}}
	if len(lines) != len(want) {
		t.Fatalf("3 records took %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		for k, v := range want[i] {
			if m[k] != v {
				t.Errorf("%s = %#v in %s, want %q", k, m[k], l, v)
			}
		}
	}
}
