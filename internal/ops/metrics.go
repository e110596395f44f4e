package ops

import (
	"bytes"
	"io"
	"strconv"
	"strings"

	vm "github.com/VictoriaMetrics/metrics"
)

// renewalBuckets are the upper bounds of etcdlead_renewal_duration_seconds:
// 0.5 ms doubling up to about 4 s.
var renewalBuckets = vm.ExponentialBuckets(0.0005, 2, 14)

// help is the HELP text of each etcdlead family. The library writes its
// HELP lines without text, so writeTo fills it in.
var help = map[string]string{
	"etcdlead_info":                     "1, labelled with this instance's election, id and etcdlead's version.",
	"etcdlead_is_leader":                "1 while this instance leads and its command runs.",
	"etcdlead_leadership_changes_total": "Terms this instance won (reason=elected) or ended, by reason.",
	"etcdlead_renewal_duration_seconds": "Latency of successful lease renewals.",
	"etcdlead_renewal_failures_total":   "Lease renewals that failed.",
	"etcdlead_fence_firings_total":      "Times the keeper stopped the command because the lease deadline came close.",
	"etcdlead_barrier_waits_total":      "Times a predecessor's lease outlived its key and this instance waited for it.",
	"etcdlead_child_starts_total":       "Commands started.",
	"etcdlead_child_exits_total":        "Commands ended, by exit code.",
	"etcdlead_check_ok":                 "1 while the check's verdict is healthy (check=health) or eligible (check=eligible), else 0.",
	"etcdlead_check_failures_total":     "Checks that failed, by check.",
	"etcdlead_notify_total":             "Role changes told to the --notify command, by role and how its run ended (replaced: never run, a newer role came first).",
}

// metrics are one Monitor's own series, in a set of its own: nothing
// global, so two Monitors in one process (tests) do not share counters.
// The Go and process metrics are not kept here: /metrics writes them when
// asked (Handler), so an instance without --status-addr never reads them.
type metrics struct {
	set        *vm.Set
	isLeader   *vm.Gauge
	renewal    *vm.PrometheusHistogram
	renewFails *vm.Counter
	fences     *vm.Counter
	barrier    *vm.Counter
	starts     *vm.Counter
}

func newMetrics(election, id, version string) metrics {
	s := vm.NewSet()
	m := metrics{
		set:        s,
		isLeader:   s.NewGauge("etcdlead_is_leader", nil),
		renewal:    s.NewPrometheusHistogramExt("etcdlead_renewal_duration_seconds", renewalBuckets),
		renewFails: s.NewCounter("etcdlead_renewal_failures_total"),
		fences:     s.NewCounter("etcdlead_fence_firings_total"),
		barrier:    s.NewCounter("etcdlead_barrier_waits_total"),
		starts:     s.NewCounter("etcdlead_child_starts_total"),
	}
	s.NewGauge(series("etcdlead_info", "election", election, "id", id, "version", version), nil).Set(1)
	// A counter that first appears at its first event reads as absent, not
	// as zero, to rate() and to alerts on it.
	for _, r := range reasons {
		m.change(r)
	}
	for _, role := range hookRoles {
		for _, res := range hookResults {
			m.hook(role, res)
		}
	}
	return m
}

// change is the counter of terms won or ended for reason.
func (m metrics) change(reason string) *vm.Counter {
	return m.set.GetOrCreateCounter(series("etcdlead_leadership_changes_total", "reason", reason))
}

// exit is the counter of commands that ended with code.
func (m metrics) exit(code int) *vm.Counter {
	return m.set.GetOrCreateCounter(series("etcdlead_child_exits_total", "code", strconv.Itoa(code)))
}

// check is the gauge of a check's verdict.
func (m metrics) check(name string) *vm.Gauge {
	return m.set.GetOrCreateGauge(series("etcdlead_check_ok", "check", name), nil)
}

// checkFailures counts a check's failures.
func (m metrics) checkFailures(name string) *vm.Counter {
	return m.set.GetOrCreateCounter(series("etcdlead_check_failures_total", "check", name))
}

// hook counts the --notify command's runs for role that ended in result.
func (m metrics) hook(role, result string) *vm.Counter {
	return m.set.GetOrCreateCounter(series("etcdlead_notify_total", "role", role, "result", result))
}

// writeTo writes the set in the text format, each etcdlead family with
// its HELP text.
func (m metrics) writeTo(w io.Writer) error {
	var in, out bytes.Buffer
	m.set.WritePrometheus(&in)
	out.Grow(in.Len() + 1024)
	for line := range strings.Lines(in.String()) {
		if name, ok := strings.CutPrefix(line, "# HELP "); ok {
			name = strings.TrimSuffix(name, "\n")
			if text, ok := help[name]; ok {
				line = "# HELP " + name + " " + text + "\n"
			}
		}
		out.WriteString(line)
	}
	_, err := out.WriteTo(w)
	return err
}

// labelValue escapes what the text format gives a meaning to inside a
// label value: the library takes a series name as written, and an id may
// hold a quote, a backslash or a line break (the command line refuses
// them, this package does not rely on it). Invalid UTF-8 becomes U+FFFD,
// since a scraper refuses the whole page for one such value.
var labelValue = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// series is name{label="value",...} for the label and value pairs kv.
func series(name string, kv ...string) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(kv[i])
		b.WriteString(`="`)
		b.WriteString(labelValue.Replace(strings.ToValidUTF8(kv[i+1], "\uFFFD")))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}
