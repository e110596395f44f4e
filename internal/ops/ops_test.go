package ops

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// /leader answers 200 only while a term is held and its child runs.
func TestLeaderOnlyWhileChildRuns(t *testing.T) {
	m := New("jobs", "c1", 10*time.Second, nil)
	h := Handler(m)
	step := func(what string, want int) {
		t.Helper()
		if code, _ := get(t, h, "/leader"); code != want {
			t.Errorf("%s: /leader %d, want %d", what, code, want)
		}
	}
	step("at start", http.StatusServiceUnavailable)
	m.Queued("p/jobs/1")
	m.Elected("p/jobs/1", 7, 1)
	step("elected, no child yet", http.StatusServiceUnavailable)
	m.ChildStarted(42)
	step("child running", http.StatusOK)
	m.ChildExited(0, false)
	step("child exited", http.StatusServiceUnavailable)
	m.ChildStarted(43)
	m.TermEnded("key-deleted")
	step("term ended", http.StatusServiceUnavailable)
}

// /healthz and the watchdog: healthy only after contact with etcd, and not
// while renewals fail.
func TestHealthFollowsEtcdContact(t *testing.T) {
	m := New("jobs", "c1", 10*time.Second, nil)
	h := Handler(m)
	if code, _ := get(t, h, "/healthz"); code != http.StatusServiceUnavailable || m.Healthy() {
		t.Errorf("healthy before any contact with etcd (%d)", code)
	}
	m.Queued("p/jobs/1")
	if code, _ := get(t, h, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz %d after queueing, want 200", code)
	}
	m.Renewed(0, errors.New("unreachable"))
	if code, _ := get(t, h, "/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz %d while renewals fail, want 503", code)
	}
	m.Renewed(time.Millisecond, nil)
	if !m.Healthy() {
		t.Error("not healthy after a renewal succeeded")
	}
}

// /status is this instance's view; systemd hears READY=1 once and each
// role change once.
func TestStatusAndNotify(t *testing.T) {
	var sent []string
	m := New("jobs", "c1", 10*time.Second, func(s string) { sent = append(sent, s) })
	m.Queued("p/jobs/1")
	m.Queued("p/jobs/1")
	m.Elected("p/jobs/1", 7, 0x1f)
	m.ChildStarted(42)
	_, body := get(t, Handler(m), "/status")
	var s Instance
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	want := Instance{Election: "jobs", ID: "c1", Role: RoleLeading, Healthy: true, Leading: true,
		Key: "p/jobs/1", Rev: 7, Lease: "1f", ChildPid: 42}
	if s != want {
		t.Errorf("/status %+v, want %+v", s, want)
	}
	wantSent := []string{"READY=1", "STATUS=campaigning jobs as c1", "STATUS=leading jobs as c1"}
	if strings.Join(sent, "|") != strings.Join(wantSent, "|") {
		t.Errorf("notified %q, want %q", sent, wantSent)
	}
}

func TestMetricsServed(t *testing.T) {
	m := New("jobs", "c1", 10*time.Second, nil)
	m.Elected("p/jobs/1", 7, 1)
	m.ChildStarted(42)
	code, body := get(t, Handler(m), "/metrics")
	for _, name := range []string{"etcdlead_is_leader 1", "etcdlead_child_starts_total 1", `etcdlead_leadership_changes_total{reason="elected"} 1`} {
		if code != http.StatusOK || !strings.Contains(body, name) {
			t.Errorf("/metrics (%d) lacks %q:\n%s", code, name, body)
		}
	}
}

// A bad address fails at start, naming the flag.
func TestServeRefusesBadAddress(t *testing.T) {
	m := New("jobs", "c1", 10*time.Second, nil)
	if _, err := Serve("127.0.0.1:99999", m); err == nil || !strings.Contains(err.Error(), "--status-addr") {
		t.Errorf("Serve with a bad port: %v", err)
	}
	stop, err := Serve("127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	stop()
}
