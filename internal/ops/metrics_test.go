package ops

import (
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// scrape reads /metrics from h as Prometheus' own text parser does, so a
// page it would refuse fails the test.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("/metrics Content-Type %q, want the text format's", ct)
	}
	body := rec.Body.String()
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	return mfs
}

func labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// An election, id or version holding quotes, backslashes, line breaks and
// text that looks like exposition lines still makes one valid page, with
// each value read back as it was given.
func TestMetricsEscapeLabelValues(t *testing.T) {
	election := `jobs "nightly" \ weekly`
	id := "c1\"} 1\n# TYPE etcdlead_info counter\netcdlead_is_leader 1\n\\"
	version := "v1\\n\"x\",id=\"y"
	mfs := scrape(t, Handler(New(election, id, version, 10*time.Second, nil)))
	info := mfs["etcdlead_info"].GetMetric()
	if len(info) != 1 {
		t.Fatalf("etcdlead_info has %d series, want 1: %v", len(info), info)
	}
	want := map[string]string{"election": election, "id": id, "version": version}
	got := labels(info[0])
	for k, v := range want {
		if got[k] != v {
			t.Errorf("etcdlead_info{%s} reads back %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) || info[0].GetGauge().GetValue() != 1 {
		t.Errorf("etcdlead_info %v, want 1 with labels %v", info[0], want)
	}
	if v := mfs["etcdlead_is_leader"].GetMetric(); len(v) != 1 || v[0].GetGauge().GetValue() != 0 {
		t.Errorf("etcdlead_is_leader %v, want one series at 0: a forged line got through", v)
	}
}

// A value that is not UTF-8 would make a scraper refuse the whole page.
func TestMetricsInvalidUTF8StillParses(t *testing.T) {
	mfs := scrape(t, Handler(New("jobs\xff", "c1\xc3", "v1", 10*time.Second, nil)))
	if len(mfs["etcdlead_info"].GetMetric()) != 1 {
		t.Errorf("etcdlead_info missing: %v", mfs["etcdlead_info"])
	}
}

// Each family has the type and HELP text it had under client_golang, the
// renewal histogram its buckets, and each series the value its events gave.
func TestMetricsTypesHelpAndValues(t *testing.T) {
	m := New("jobs", "c1", "v1.2.3", 10*time.Second, nil)
	m.Queued("p/jobs/1")
	m.Elected("p/jobs/1", 7, 1)
	m.ChildStarted(42)
	m.Renewed(3*time.Millisecond, nil)
	m.Renewed(0, errors.New("unreachable"))
	m.BarrierWait()
	m.ChildExited(2, true)
	m.TermEnded(ReasonFenced)
	m.Checked(CheckHealth, Check{Status: "unhealthy"}, false)
	m.Hooked(HookLeader, HookTimeout)
	mfs := scrape(t, Handler(m))

	types := map[string]dto.MetricType{
		"etcdlead_info": dto.MetricType_GAUGE, "etcdlead_is_leader": dto.MetricType_GAUGE,
		"etcdlead_leadership_changes_total": dto.MetricType_COUNTER,
		"etcdlead_renewal_duration_seconds": dto.MetricType_HISTOGRAM,
		"etcdlead_renewal_failures_total":   dto.MetricType_COUNTER, "etcdlead_fence_firings_total": dto.MetricType_COUNTER,
		"etcdlead_barrier_waits_total": dto.MetricType_COUNTER, "etcdlead_child_starts_total": dto.MetricType_COUNTER,
		"etcdlead_child_exits_total": dto.MetricType_COUNTER,
		"etcdlead_check_ok":          dto.MetricType_GAUGE, "etcdlead_check_failures_total": dto.MetricType_COUNTER,
		"etcdlead_notify_total": dto.MetricType_COUNTER,
		"go_goroutines":         dto.MetricType_GAUGE, "process_resident_memory_bytes": dto.MetricType_GAUGE,
		"process_cpu_seconds_total": dto.MetricType_COUNTER, "process_open_fds": dto.MetricType_GAUGE,
	}
	for name, typ := range types {
		mf, ok := mfs[name]
		if !ok {
			t.Errorf("/metrics lacks %s", name)
			continue
		}
		if mf.GetType() != typ {
			t.Errorf("%s is %v, want %v", name, mf.GetType(), typ)
		}
		if text, ok := help[name]; ok && mf.GetHelp() != text {
			t.Errorf("%s HELP %q, want %q", name, mf.GetHelp(), text)
		}
	}
	for name := range help {
		if _, ok := types[name]; !ok {
			t.Errorf("%s has a HELP text but is not checked here", name)
		}
	}

	counter := func(name string, l map[string]string) float64 {
		t.Helper()
		for _, s := range mfs[name].GetMetric() {
			got := labels(s)
			if len(got) == len(l) && func() bool {
				for k, v := range l {
					if got[k] != v {
						return false
					}
				}
				return true
			}() {
				return s.GetCounter().GetValue()
			}
		}
		t.Errorf("no %s%v", name, l)
		return math.NaN()
	}
	for _, r := range reasons {
		want := 0.0
		if r == ReasonElected || r == ReasonFenced {
			want = 1
		}
		if got := counter("etcdlead_leadership_changes_total", map[string]string{"reason": r}); got != want {
			t.Errorf("etcdlead_leadership_changes_total{reason=%q} %v, want %v", r, got, want)
		}
	}
	if n := len(mfs["etcdlead_leadership_changes_total"].GetMetric()); n != len(reasons) {
		t.Errorf("etcdlead_leadership_changes_total has %d series, want one per reason (%d)", n, len(reasons))
	}
	for name, want := range map[string]float64{"etcdlead_renewal_failures_total": 1, "etcdlead_fence_firings_total": 1,
		"etcdlead_barrier_waits_total": 1, "etcdlead_child_starts_total": 1} {
		if got := counter(name, nil); got != want {
			t.Errorf("%s %v, want %v", name, got, want)
		}
	}
	if got := counter("etcdlead_child_exits_total", map[string]string{"code": "2"}); got != 1 {
		t.Errorf(`etcdlead_child_exits_total{code="2"} %v, want 1`, got)
	}
	for _, role := range hookRoles {
		for _, res := range hookResults {
			want := 0.0
			if role == HookLeader && res == HookTimeout {
				want = 1
			}
			if got := counter("etcdlead_notify_total", map[string]string{"role": role, "result": res}); got != want {
				t.Errorf("etcdlead_notify_total{role=%q,result=%q} %v, want %v", role, res, got, want)
			}
		}
	}
	if v := mfs["etcdlead_is_leader"].GetMetric(); len(v) != 1 || v[0].GetGauge().GetValue() != 0 {
		t.Errorf("etcdlead_is_leader %v after the child exited, want one series at 0", v)
	}

	hs := mfs["etcdlead_renewal_duration_seconds"].GetMetric()
	if len(hs) != 1 {
		t.Fatalf("etcdlead_renewal_duration_seconds has %d series, want 1", len(hs))
	}
	h := hs[0].GetHistogram()
	var bounds []float64
	for _, b := range h.GetBucket() {
		if !math.IsInf(b.GetUpperBound(), 1) {
			bounds = append(bounds, b.GetUpperBound())
		}
		if wantCount := b.GetUpperBound() >= 0.003; (b.GetCumulativeCount() == 1) != wantCount {
			t.Errorf("bucket le=%v holds %d, want the one 3 ms renewal only from 4 ms up", b.GetUpperBound(), b.GetCumulativeCount())
		}
	}
	if len(bounds) != 14 {
		t.Fatalf("renewal histogram has %d finite buckets %v, want 14", len(bounds), bounds)
	}
	for i, b := range bounds {
		if want := 0.0005 * math.Pow(2, float64(i)); math.Abs(b-want) > 1e-12 {
			t.Errorf("bucket %d le=%v, want %v", i, b, want)
		}
	}
	if h.GetSampleCount() != 1 || math.Abs(h.GetSampleSum()-0.003) > 1e-9 {
		t.Errorf("renewal histogram count %d sum %v, want one renewal of 3 ms", h.GetSampleCount(), h.GetSampleSum())
	}
}

// Every family on /metrics, etcdlead's and the Go runtime's and the
// process's, passes Prometheus' own linter, `promtool check metrics`: a
// HELP text each, counters and only counters ending in _total, no _count
// outside histograms and summaries. .ci/run installs promtool (Debian's
// prometheus package); on CI a missing promtool fails the test.
func TestMetricsPassPromtool(t *testing.T) {
	if left, err := writeRuntime(io.Discard); err != nil || len(left) > 0 {
		t.Errorf("the library wrote families runtimeFamilies does not know, left out of /metrics: %q (%v)", left, err)
	}
	tool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool is missing: .ci/run installs Debian's prometheus package for this test")
		}
		t.Skip("promtool is missing (apt-get install prometheus): /metrics is not linted")
	}
	m := New("jobs", "c1", "v1.2.3", 10*time.Second, nil)
	m.Queued("p/jobs/1")
	m.Elected("p/jobs/1", 7, 1)
	m.ChildStarted(42)
	m.Renewed(3*time.Millisecond, nil)
	m.ChildExited(2, true)
	m.TermEnded(ReasonFenced)
	code, body := get(t, Handler(m), "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics %d", code)
	}
	for _, name := range []string{"etcdlead_child_exits_total", "etcdlead_renewal_duration_seconds", "go_goroutines",
		"go_gc_duration_seconds", "go_sched_latencies_seconds", "process_cpu_seconds_total", "process_open_fds"} {
		if !strings.Contains(body, "\n# TYPE "+name+" ") {
			t.Errorf("/metrics lacks %s: the lint would not cover it", name)
		}
	}
	cmd := exec.Command(tool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
