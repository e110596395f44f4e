package ops

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/etcdlead/etcdlead/internal/oneline"
)

// Roles of this instance, as /status, STATUS= and the logs name them.
const (
	RoleStarting    = "starting"
	RoleCampaigning = "campaigning"
	RoleLeading     = "leading"
	RoleHolding     = "holding" // leading after the command ended (--hold-at-least)
	RoleBackingOff  = "backing-off"
	RoleStopping    = "stopping"
)

// Reasons a term ends (or is won), the values of
// etcdlead_leadership_changes_total{reason}: a fixed set, so each series
// exists from the start and no error text becomes a label.
const (
	ReasonElected     = "elected"
	ReasonExited      = "exited"       // the command ended by itself
	ReasonStopped     = "stopped"      // a stop signal
	ReasonTimeout     = "timeout"      // --timeout
	ReasonResigned    = "resigned"     // stepped down on an operator's request
	ReasonKeyDeleted  = "key-deleted"  // lost: the queue key was deleted
	ReasonKeyReplaced = "key-replaced" // lost: the queue key was put again
	ReasonLeaseLost   = "lease-lost"   // lost: etcd ended the lease
	ReasonFenced      = "fenced"       // lost: the keeper's fence stopped the command
	ReasonLost        = "lost"         // lost in another way
	ReasonRefused     = "refused"      // etcd refused what the term needs
	ReasonPastFence   = "past-fence"   // won too late to start the command
	ReasonStartFailed = "start-failed"
	ReasonKeeperLost  = "keeper-lost"
)

var reasons = []string{ReasonElected, ReasonExited, ReasonStopped, ReasonTimeout, ReasonResigned,
	ReasonKeyDeleted, ReasonKeyReplaced, ReasonLeaseLost, ReasonFenced, ReasonLost, ReasonRefused,
	ReasonPastFence, ReasonStartFailed, ReasonKeeperLost}

// Monitor is what this instance knows about itself, for /healthz, /leader,
// /status, /metrics and systemd. The campaign reports renewals to it; the
// runner reports transitions.
type Monitor struct {
	election, id string
	ttl          time.Duration
	notify       func(state string) // sd_notify, or a no-op
	ready        sync.Once
	runtime      sync.Once // the Go and process collectors, once served

	mu       sync.Mutex
	role     string
	key      string
	rev      int64
	lease    int64
	childPid int
	lastOK   time.Time // last successful contact with etcd: queued or renewed
	failing  bool
	// holders is --holders when more than one, and slot the slot of the
	// term this instance holds (-1 for none).
	holders, slot int

	m metrics
}

type metrics struct {
	reg        *prometheus.Registry
	info       *prometheus.GaugeVec
	isLeader   prometheus.Gauge
	changes    *prometheus.CounterVec
	renewal    prometheus.Histogram
	renewFails prometheus.Counter
	fences     prometheus.Counter
	barrier    prometheus.Counter
	starts     prometheus.Counter
	exits      *prometheus.CounterVec
}

func newMetrics() metrics {
	m := metrics{
		reg: prometheus.NewRegistry(),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "etcdlead_info",
			Help: "1, labelled with this instance's election, id and etcdlead's version."}, []string{"election", "id", "version"}),
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdlead_is_leader",
			Help: "1 while this instance leads and its command runs."}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdlead_leadership_changes_total",
			Help: "Terms this instance won (reason=elected) or ended, by reason."}, []string{"reason"}),
		renewal: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "etcdlead_renewal_duration_seconds",
			Help: "Latency of successful lease renewals.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		renewFails: prometheus.NewCounter(prometheus.CounterOpts{Name: "etcdlead_renewal_failures_total",
			Help: "Lease renewals that failed."}),
		fences: prometheus.NewCounter(prometheus.CounterOpts{Name: "etcdlead_fence_firings_total",
			Help: "Times the keeper stopped the command because the lease deadline came close."}),
		barrier: prometheus.NewCounter(prometheus.CounterOpts{Name: "etcdlead_barrier_waits_total",
			Help: "Times a predecessor's lease outlived its key and this instance waited for it."}),
		starts: prometheus.NewCounter(prometheus.CounterOpts{Name: "etcdlead_child_starts_total",
			Help: "Commands started."}),
		exits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdlead_child_exits_total",
			Help: "Commands ended, by exit code."}, []string{"code"}),
	}
	m.reg.MustRegister(m.info, m.isLeader, m.changes, m.renewal, m.renewFails, m.fences, m.barrier, m.starts, m.exits)
	// A counter that first appears at its first event reads as absent, not
	// as zero, to rate() and to alerts on it.
	for _, r := range reasons {
		m.changes.WithLabelValues(r)
	}
	return m
}

// New returns the monitor of one candidate of etcdlead version; notify
// receives sd_notify states (Notify, or nil for none).
func New(election, id, version string, ttl time.Duration, notify func(string)) *Monitor {
	if notify == nil {
		notify = func(string) {}
	}
	m := &Monitor{election: election, id: id, ttl: ttl, notify: notify, role: RoleStarting, slot: -1, m: newMetrics()}
	m.m.info.WithLabelValues(election, id, version).Set(1)
	return m
}

// registry is the registry that /metrics serves. The Go and process
// collectors join it only here, so an instance without --status-addr
// keeps none of their state.
func (m *Monitor) registry() *prometheus.Registry {
	m.runtime.Do(func() {
		m.m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	})
	return m.m.reg
}

// Renewed implements campaign.Observer.
func (m *Monitor) Renewed(latency time.Duration, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.failing = true
		m.m.renewFails.Inc()
		return
	}
	m.failing = false
	m.lastOK = time.Now()
	m.m.renewal.Observe(latency.Seconds())
}

// BarrierWait implements campaign.Observer.
func (m *Monitor) BarrierWait() { m.m.barrier.Inc() }

// Queued: connected and campaigning, at key.
func (m *Monitor) Queued(key string) {
	m.mu.Lock()
	m.lastOK = time.Now()
	m.failing = false
	m.mu.Unlock()
	m.ready.Do(func() { m.notify("READY=1") })
	m.SetRole(RoleCampaigning)
}

func (m *Monitor) SetRole(role string) {
	m.mu.Lock()
	changed := m.role != role
	m.role = role
	holder := ""
	if m.holders > 1 && m.slot >= 0 && (role == RoleLeading || role == RoleHolding) {
		holder = fmt.Sprintf(" (holder, slot %d of %d)", m.slot, m.holders)
	}
	m.mu.Unlock()
	if !changed {
		return
	}
	if role == RoleStopping {
		// systemd shows "deactivating" from now on, also when the stop
		// was not its own (a signal from elsewhere).
		m.notify("STOPPING=1")
	}
	// One line whatever the id: sd_notify reads each line of a message as
	// a variable of its own, so a newline could set MAINPID= or READY=.
	m.notify("STATUS=" + role + " " + oneline.Quote(m.election) + " as " + oneline.Quote(m.id) + holder)
}

// Holder says which slot of how many holders the term now won holds
// (--holders > 1), for STATUS= and /status; called after Elected.
func (m *Monitor) Holder(slot, holders int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if holders > 1 {
		m.slot, m.holders = slot, holders
	}
}

func (m *Monitor) Elected(key string, rev, lease int64) {
	m.mu.Lock()
	m.key, m.rev, m.lease = key, rev, lease
	m.mu.Unlock()
	m.m.changes.WithLabelValues(ReasonElected).Inc()
}

func (m *Monitor) ChildStarted(pid int) {
	m.mu.Lock()
	m.childPid = pid
	m.mu.Unlock()
	m.m.starts.Inc()
	m.m.isLeader.Set(1)
	m.SetRole(RoleLeading)
}

func (m *Monitor) ChildExited(code int, fenced bool) {
	m.mu.Lock()
	m.childPid = 0
	m.mu.Unlock()
	m.m.isLeader.Set(0)
	m.m.exits.WithLabelValues(strconv.Itoa(code)).Inc()
	if fenced {
		m.m.fences.Inc()
	}
}

func (m *Monitor) TermEnded(reason string) {
	m.mu.Lock()
	m.key, m.rev, m.lease, m.slot = "", 0, 0, -1
	m.mu.Unlock()
	m.m.changes.WithLabelValues(reason).Inc()
}

// Healthy: etcd answered within one TTL, and the last renewal did not fail.
func (m *Monitor) Healthy() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.failing && !m.lastOK.IsZero() && time.Since(m.lastOK) < m.ttl
}

// Leading: this instance leads and its command runs.
func (m *Monitor) Leading() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.childPid != 0 && m.key != ""
}

// Say sends a free-form status line to systemd.
func (m *Monitor) Say(status string) { m.notify("STATUS=" + oneline.Quote(status)) }
