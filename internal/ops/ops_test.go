package ops

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// skipIfShort leaves a test to the full suite under go test -short: here,
// the one that freezes etcd for a TTL.
func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow: runs in the full suite (go test -race -p 1 ./...)")
	}
}

// /leader answers 200 only while a term is held and its child runs.
func TestLeaderOnlyWhileChildRuns(t *testing.T) {
	m := New("jobs", "c1", "v1.2.3", 10*time.Second, nil)
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

// /healthz and the watchdog: healthy exactly while etcd answered within
// one TTL, whatever a failed renewal in between says; the body names that
// check, when etcd last answered and the bound, in every state.
func TestHealthIsEtcdAnswerWithinOneTTL(t *testing.T) {
	m := New("jobs", "c1", "v1.2.3", 10*time.Second, nil)
	clock := m.started
	m.now = func() time.Time { return clock }
	h := Handler(m)
	step := func(what string, wantOK bool, wantBody string) {
		t.Helper()
		want := http.StatusOK
		if !wantOK {
			want = http.StatusServiceUnavailable
		}
		code, body := get(t, h, "/healthz")
		if code != want || body != wantBody+"\n" || m.Healthy() != wantOK {
			t.Errorf("%s: /healthz %d %q (Healthy %v), want %d %q", what, code, body, m.Healthy(), want, wantBody)
		}
	}
	clock = clock.Add(1500 * time.Millisecond)
	step("before any answer", false,
		"unhealthy: etcd has not answered since the start, 1.5s ago; healthy needs an answer within one TTL (10s)")
	m.Queued("p/jobs/1")
	step("queued", true, "healthy: etcd answered 0s ago, within one TTL (10s)")
	clock = clock.Add(2 * time.Second)
	m.Renewed(time.Second, errors.New("context deadline exceeded"))
	step("a renewal failed 2s after the last answer", true, "healthy: etcd answered 2s ago, within one TTL (10s)")
	clock = clock.Add(7999 * time.Millisecond)
	m.Renewed(time.Second, errors.New("context deadline exceeded"))
	step("unanswered for just under one TTL", true, "healthy: etcd answered 9.999s ago, within one TTL (10s)")
	clock = clock.Add(time.Millisecond)
	step("unanswered for one TTL", false, "unhealthy: etcd last answered 10s ago, not within one TTL (10s)")
	clock = clock.Add(25 * time.Second)
	step("unanswered for longer", false, "unhealthy: etcd last answered 35s ago, not within one TTL (10s)")
	m.Renewed(3*time.Millisecond, nil)
	step("renewed", true, "healthy: etcd answered 0s ago, within one TTL (10s)")
}

// /status is this instance's view; systemd hears READY=1 once and each
// role change once.
func TestStatusAndNotify(t *testing.T) {
	var sent []string
	m := New("jobs", "c1", "v1.2.3", 10*time.Second, func(s string) { sent = append(sent, s) })
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
	if !reflect.DeepEqual(s, want) {
		t.Errorf("/status %+v, want %+v", s, want)
	}
	wantSent := []string{"READY=1", "STATUS=campaigning jobs as c1", "STATUS=leading jobs as c1"}
	if strings.Join(sent, "|") != strings.Join(wantSent, "|") {
		t.Errorf("notified %q, want %q", sent, wantSent)
	}
}

// A candidate that holds no lease but reached etcd (not eligible, or
// sitting out) is ready and healthy.
func TestReachedIsReadyAndHealthy(t *testing.T) {
	var sent []string
	m := New("jobs", "c1", "v1.2.3", 10*time.Second, func(s string) { sent = append(sent, s) })
	if m.Healthy() {
		t.Fatal("healthy before etcd answered")
	}
	m.Reached()
	m.Reached()
	if !m.Healthy() || strings.Join(sent, "|") != "READY=1" {
		t.Errorf("healthy %v, notified %q; want healthy and READY=1 once", m.Healthy(), sent)
	}
}

// The command's health check: its verdict in /status, in STATUS= while
// leading (once per change), and in /metrics with its failures.
func TestHealthCheckReported(t *testing.T) {
	var sent []string
	m := New("jobs", "c1", "v1.2.3", 10*time.Second, func(s string) { sent = append(sent, s) })
	m.Queued("p/jobs/1")
	m.Elected("p/jobs/1", 7, 0x1f)
	m.ChildStarted(42)
	at := time.Unix(1000, 0).UTC()
	m.Checked(CheckHealth, Check{Status: "healthy", Last: "passed (0)", At: at}, true)
	m.Checked(CheckHealth, Check{Status: "healthy", Failing: 1, Last: "failed (1)", At: at}, false)
	m.Checked(CheckHealth, Check{Status: "unhealthy", Failing: 2, Last: "failed (1)", Output: "db down", At: at}, false)
	_, body := get(t, Handler(m), "/status")
	var s Instance
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	want := Check{Status: "unhealthy", Failing: 2, Last: "failed (1)", Output: "db down", At: at}
	if got := s.Checks[CheckHealth]; got != want {
		t.Errorf("/status checks %+v, want %+v", s.Checks, want)
	}
	wantSent := []string{"READY=1", "STATUS=campaigning jobs as c1", "STATUS=leading jobs as c1",
		"STATUS=leading jobs as c1, command healthy", "STATUS=leading jobs as c1, command unhealthy"}
	if strings.Join(sent, "|") != strings.Join(wantSent, "|") {
		t.Errorf("notified %q, want %q", sent, wantSent)
	}
	_, metrics := get(t, Handler(m), "/metrics")
	for _, line := range []string{`etcdlead_check_ok{check="health"} 0`, `etcdlead_check_failures_total{check="health"} 2`} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

// A stop sends STOPPING=1 once, and no value makes a message more than one
// line: sd_notify would read a second line as a variable of its own.
func TestNotifyStoppingAndOneLine(t *testing.T) {
	var sent []string
	m := New("jobs", "c1\nMAINPID=1\x1b[2J", "v1.2.3", 10*time.Second, func(s string) { sent = append(sent, s) })
	m.Queued("p/jobs/1")
	m.Say("etcd says:\nREADY=1")
	m.SetRole(RoleStopping)
	m.SetRole(RoleStopping)
	stopping := 0
	for _, s := range sent {
		if strings.ContainsAny(s, "\n\r\x1b") {
			t.Errorf("notified %q: more than one clean line", s)
		}
		if s == "STOPPING=1" {
			stopping++
		}
	}
	if stopping != 1 {
		t.Errorf("STOPPING=1 sent %d times, want once; sent %q", stopping, sent)
	}
	if want := `STATUS=stopping jobs as "c1\nMAINPID=1\x1b[2J"`; sent[len(sent)-1] != want {
		t.Errorf("last message %q, want %q", sent[len(sent)-1], want)
	}
}

// Before any event: etcdlead_info, every counter at zero (each reason of
// leadership changes too), and the Go and process collectors.
func TestMetricsBeforeAnyEvent(t *testing.T) {
	m := New("jobs", "c1", "v1.2.3", 10*time.Second, nil)
	var own bytes.Buffer
	if err := m.m.writeTo(&own); err != nil {
		t.Fatal(err)
	}
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(&own)
	if err != nil {
		t.Fatal(err)
	}
	for name := range mfs {
		if !strings.HasPrefix(name, "etcdlead_") {
			t.Errorf("%s is collected before /metrics is served", name)
		}
	}
	code, body := get(t, Handler(m), "/metrics")
	want := []string{`etcdlead_info{election="jobs",id="c1",version="v1.2.3"} 1`,
		"etcdlead_renewal_failures_total 0", "etcdlead_fence_firings_total 0", "etcdlead_barrier_waits_total 0",
		"etcdlead_child_starts_total 0", "etcdlead_is_leader 0", "go_goroutines ", "process_resident_memory_bytes "}
	for _, r := range reasons {
		want = append(want, `etcdlead_leadership_changes_total{reason="`+r+`"} 0`)
	}
	for _, role := range hookRoles {
		for _, res := range hookResults {
			want = append(want, `etcdlead_notify_total{role="`+role+`",result="`+res+`"} 0`)
		}
	}
	for _, w := range want {
		if code != http.StatusOK || !strings.Contains(body, w) {
			t.Errorf("/metrics (%d) lacks %q", code, w)
		}
	}
}

func TestMetricsServed(t *testing.T) {
	m := New("jobs", "c1", "v1.2.3", 10*time.Second, nil)
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
	m := New("jobs", "c1", "v1.2.3", 10*time.Second, nil)
	if _, _, err := Serve("127.0.0.1:99999", m); err == nil || !strings.Contains(err.Error(), "--status-addr") {
		t.Errorf("Serve with a bad port: %v", err)
	}
	addr, stop, err := Serve("127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if strings.HasSuffix(addr, ":0") {
		t.Errorf("Serve on port 0 says it listens on %s, not the port it got", addr)
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("nothing answers at the address Serve returned: %v", err)
	}
	resp.Body.Close()
}

// docs/operating.md lists every reason of etcdlead_leadership_changes_total.
func TestOperatingListsEveryReason(t *testing.T) {
	b, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reasons {
		if !strings.Contains(string(b), "`"+r+"`") {
			t.Errorf("docs/operating.md does not list the reason `%s`", r)
		}
	}
}

// docs/operating.md names every role and result of etcdlead_notify_total.
func TestOperatingListsEveryHookLabel(t *testing.T) {
	b, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range append(slices.Clone(hookRoles), hookResults...) {
		if !strings.Contains(string(b), "`"+v+"`") {
			t.Errorf("docs/operating.md does not name the --notify role or result `%s`", v)
		}
	}
}

// Every Reason constant is in reasons, and every Hook constant in
// hookRoles or hookResults, so that its series reads zero from the start
// rather than appearing at its first event.
func TestEveryReasonSeriesExistsFromTheStart(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "monitor.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					continue
				}
				v := strings.Trim(lit.Value, `"`)
				switch {
				case strings.HasPrefix(n.Name, "Reason") && !slices.Contains(reasons, v):
					t.Errorf("%s (%s) is not in reasons: its series appears only at its first event", n.Name, v)
				case strings.HasPrefix(n.Name, "Hook") && !slices.Contains(hookRoles, v) && !slices.Contains(hookResults, v):
					t.Errorf("%s (%s) is in neither hookRoles nor hookResults: its series appear only at their first event", n.Name, v)
				}
			}
		}
	}
}

// With --holders N > 1, STATUS= and /status say which slot this holder
// holds, and stop saying so when its term ends.
func TestHolderStatus(t *testing.T) {
	var sent []string
	m := New("jobs", "c1", "v1.2.3", 10*time.Second, func(s string) { sent = append(sent, s) })
	m.Queued("p/jobs/1")
	m.Elected("p/jobs/1", 7, 0x1f)
	m.Holder(1, 2)
	m.ChildStarted(42)
	_, body := get(t, Handler(m), "/status")
	var s Instance
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if s.Holders != 2 || s.Slot == nil || *s.Slot != 1 || !s.Leading {
		t.Errorf("/status %s, want holders 2, slot 1, leading", body)
	}
	if want := "STATUS=leading jobs as c1 (holder, slot 1 of 2)"; sent[len(sent)-1] != want {
		t.Errorf("notified %q, want %q last", sent, want)
	}
	m.ChildExited(0, false)
	m.TermEnded(ReasonExited)
	m.SetRole(RoleCampaigning)
	if _, body = get(t, Handler(m), "/status"); strings.Contains(body, `"slot"`) {
		t.Errorf("/status after the term %s, want no slot", body)
	}
	if want := "STATUS=campaigning jobs as c1"; sent[len(sent)-1] != want {
		t.Errorf("notified %q, want %q last", sent, want)
	}
}
