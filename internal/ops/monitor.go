package ops

import (
	"fmt"
	"sync"
	"time"

	"github.com/etcdlead/etcdlead/internal/oneline"
)

// Roles of this instance, as /status, STATUS= and the logs name them.
const (
	RoleStarting    = "starting"
	RoleCampaigning = "campaigning"
	RoleLeading     = "leading"
	RoleHolding     = "holding" // leading after the command ended (--hold-at-least)
	RoleBackingOff  = "backing-off"
	RolePaused      = "paused"     // the election is paused (etcdlead pause): waiting for its resume
	RoleIneligible  = "ineligible" // --eligible-cmd fails: not queued
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
	ReasonPaused      = "paused"       // stopped by the election's pause
	ReasonKeyDeleted  = "key-deleted"  // lost: the queue key was deleted
	ReasonKeyReplaced = "key-replaced" // lost: the queue key was put again
	ReasonLeaseLost   = "lease-lost"   // lost: etcd ended the lease
	ReasonFenced      = "fenced"       // lost: the keeper's fence stopped the command
	ReasonLost        = "lost"         // lost in another way
	ReasonRefused     = "refused"      // etcd refused what the term needs
	ReasonPastFence   = "past-fence"   // won too late to start the command
	ReasonStartFailed = "start-failed"
	ReasonKeeperLost  = "keeper-lost"
	ReasonUnhealthy   = "unhealthy"  // stepped down: the command's health check failed
	ReasonIneligible  = "ineligible" // stepped down: --eligible-cmd failed
)

// The roles --notify tells its command of, and how each run of it ended:
// the labels of etcdlead_notify_total{role,result}, a fixed set, so each
// series exists from the start (docs/operating.md, "Telling others of a
// role change").
const (
	HookLeader   = "leader"   // the command was started: this candidate leads
	HookFollower = "follower" // a term ended: its command and every descendant are gone
	HookStopped  = "stopped"  // etcdlead exits, its command gone

	HookOK       = "ok"       // exited 0
	HookFailed   = "failed"   // exited non-zero, or could not be run
	HookTimeout  = "timeout"  // killed with its processes at --notify-timeout
	HookReplaced = "replaced" // never ran: a newer role came before it could start
)

var (
	hookRoles   = []string{HookLeader, HookFollower, HookStopped}
	hookResults = []string{HookOK, HookFailed, HookTimeout, HookReplaced}
)

var reasons = []string{ReasonElected, ReasonExited, ReasonStopped, ReasonTimeout, ReasonResigned,
	ReasonPaused, ReasonKeyDeleted, ReasonKeyReplaced, ReasonLeaseLost, ReasonFenced, ReasonLost, ReasonRefused,
	ReasonPastFence, ReasonStartFailed, ReasonKeeperLost, ReasonUnhealthy, ReasonIneligible}

// Monitor is what this instance knows about itself, for /healthz, /leader,
// /status, /metrics and systemd. The campaign reports renewals to it; the
// runner reports transitions.
type Monitor struct {
	election, id string
	ttl          time.Duration
	notify       func(state string) // sd_notify, or a no-op
	ready        sync.Once
	now          func() time.Time // the wall clock; tests set their own
	started      time.Time

	mu       sync.Mutex
	role     string
	key      string
	rev      int64
	lease    int64
	childPid int
	lastOK   time.Time // last answer from etcd: queued or renewed
	// holders is --holders when more than one, and slot the slot of the
	// term this instance holds (-1 for none).
	holders, slot int
	containment   Containment
	// checks are the health and eligibility checks' last verdicts, by
	// check name (CheckHealth, CheckEligible).
	checks map[string]Check
	// ended is the reason the last term ended (TermEnded), for the hook
	// told of it (--notify).
	ended string

	m metrics
}

// New returns the monitor of one candidate of etcdlead version; notify
// receives sd_notify states (Notify, or nil for none).
func New(election, id, version string, ttl time.Duration, notify func(string)) *Monitor {
	if notify == nil {
		notify = func(string) {}
	}
	return &Monitor{election: election, id: id, ttl: ttl, notify: notify, now: time.Now, started: time.Now(),
		role: RoleStarting, slot: -1, m: newMetrics(election, id, version)}
}

// Contained records the containment in force (supervisor.Contain).
func (m *Monitor) Contained(mode, cgroup, why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.containment = Containment{Mode: mode, Cgroup: cgroup, Reason: why}
}

// Renewed implements campaign.Observer. A failed renewal alone does not
// make this instance unhealthy: the lease outlives it, and the next
// attempt follows within the renewal interval (docs/design.md).
func (m *Monitor) Renewed(latency time.Duration, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.m.renewFails.Inc()
		return
	}
	m.lastOK = m.now()
	m.m.renewal.Update(latency.Seconds())
}

// BarrierWait implements campaign.Observer.
func (m *Monitor) BarrierWait() { m.m.barrier.Inc() }

// Queued: connected and campaigning, at key.
func (m *Monitor) Queued(key string) {
	m.mu.Lock()
	m.lastOK = m.now()
	m.mu.Unlock()
	m.ready.Do(func() { m.notify("READY=1") })
	m.SetRole(RoleCampaigning)
}

// Reached: etcd answered a candidate that holds no lease (not eligible, or
// sitting out after its command was unhealthy). It is ready, as one that
// queued: it does what it should.
func (m *Monitor) Reached() {
	m.mu.Lock()
	m.lastOK = m.now()
	m.mu.Unlock()
	m.ready.Do(func() { m.notify("READY=1") })
}

// Paused: connected, and the election is paused. A candidate started
// during a pause is ready as one that queued: it does what it should.
func (m *Monitor) Paused() {
	m.mu.Lock()
	m.lastOK = m.now()
	m.mu.Unlock()
	m.ready.Do(func() { m.notify("READY=1") })
	m.SetRole(RolePaused)
}

func (m *Monitor) SetRole(role string) {
	m.mu.Lock()
	changed := m.role != role
	m.role = role
	m.mu.Unlock()
	if !changed {
		return
	}
	if role == RoleStopping {
		// systemd shows "deactivating" from now on, also when the stop
		// was not its own (a signal from elsewhere).
		m.notify("STOPPING=1")
	}
	m.sayRole()
}

// sayRole sends STATUS= with the role, and what goes with it: the slot of
// a holder, the command's health while it leads.
func (m *Monitor) sayRole() {
	m.mu.Lock()
	role, extra := m.role, ""
	if m.holders > 1 && m.slot >= 0 && (role == RoleLeading || role == RoleHolding) {
		extra = fmt.Sprintf(" (holder, slot %d of %d)", m.slot, m.holders)
	}
	if c, ok := m.checks[CheckHealth]; ok && role == RoleLeading {
		extra += ", command " + c.Status
	}
	m.mu.Unlock()
	// One line whatever the id: sd_notify reads each line of a message as
	// a variable of its own, so a newline could set MAINPID= or READY=.
	m.notify("STATUS=" + role + " " + oneline.Quote(m.election) + " as " + oneline.Quote(m.id) + extra)
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
	m.m.change(ReasonElected).Inc()
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
	m.m.exit(code).Inc()
	if fenced {
		m.m.fences.Inc()
	}
}

func (m *Monitor) TermEnded(reason string) {
	m.mu.Lock()
	m.key, m.rev, m.lease, m.slot = "", 0, 0, -1
	m.ended = reason
	m.mu.Unlock()
	m.m.change(reason).Inc()
}

// LastEnded is the reason the last term ended, "" before any did.
func (m *Monitor) LastEnded() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ended
}

// Hooked counts a run of --notify's command for role, or a role it was
// never told because a newer one replaced it (result HookReplaced).
func (m *Monitor) Hooked(role, result string) { m.m.hook(role, result).Inc() }

// Healthy: etcd answered this instance (its queueing or a renewal of its
// lease) within one TTL.
func (m *Monitor) Healthy() bool {
	ok, _ := m.Health()
	return ok
}

// Health is Healthy, and a line that names the check and its bound: when
// etcd last answered, or that it has not since the start, against one TTL.
// One TTL is the bound the lease itself sets: unanswered for that long,
// this instance is past the fence of any term it led, so its command was
// stopped (docs/design.md); a shorter silence, or a failed renewal, is
// what the renewals ride out.
func (m *Monitor) Health() (bool, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if m.lastOK.IsZero() {
		return false, fmt.Sprintf("unhealthy: etcd has not answered since the start, %s ago; healthy needs an answer within one TTL (%s)",
			since(now, m.started), m.ttl)
	}
	ago := since(now, m.lastOK)
	if ago < m.ttl {
		return true, fmt.Sprintf("healthy: etcd answered %s ago, within one TTL (%s)", ago, m.ttl)
	}
	return false, fmt.Sprintf("unhealthy: etcd last answered %s ago, not within one TTL (%s)", ago, m.ttl)
}

// since is now-t in milliseconds: finer digits would say nothing.
func since(now, t time.Time) time.Duration { return now.Sub(t).Truncate(time.Millisecond) }

// Leading: this instance leads and its command runs.
func (m *Monitor) Leading() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.childPid != 0 && m.key != ""
}

// The checks Checked reports on.
const (
	CheckHealth   = "health"   // --health-cmd or --health-url: the command's health
	CheckEligible = "eligible" // --eligible-cmd: whether this candidate may lead
)

// Check is a check's last verdict, for /status.
type Check struct {
	Status  string    `json:"status"`  // starting, healthy or unhealthy (eligible: eligible or ineligible)
	Failing int       `json:"failing"` // failures in a row that count
	Last    string    `json:"last"`    // what the last check said
	Output  string    `json:"output,omitempty"`
	At      time.Time `json:"at"`
}

// Checked records a check's result and the verdict after it. A change of
// the command's health while leading reaches STATUS= at once.
func (m *Monitor) Checked(name string, c Check, ok bool) {
	m.mu.Lock()
	if m.checks == nil {
		m.checks = map[string]Check{}
	}
	before, seen := m.checks[name]
	m.checks[name] = c
	role := m.role
	m.mu.Unlock()
	m.m.check(name).Set(map[bool]float64{false: 0, true: 1}[c.Status == "healthy" || c.Status == "eligible"])
	if !ok {
		m.m.checkFailures(name).Inc()
	}
	if name == CheckHealth && role == RoleLeading && (!seen || before.Status != c.Status) {
		m.sayRole()
	}
}

// Say sends a free-form status line to systemd.
func (m *Monitor) Say(status string) { m.notify("STATUS=" + oneline.Quote(status)) }
