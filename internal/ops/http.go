package ops

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
)

// Instance is /status: this instance's own view, in the shape of one
// entry of `etcdlead status --json` plus what only the instance knows.
type Instance struct {
	Election string `json:"election"`
	ID       string `json:"id"`
	Role     string `json:"role"`
	Healthy  bool   `json:"healthy"`
	Leading  bool   `json:"leading"`
	Key      string `json:"key,omitempty"`
	Rev      int64  `json:"rev,omitempty"`
	Lease    string `json:"lease,omitempty"`
	ChildPid int    `json:"child_pid,omitempty"`
	// Holders is --holders when more than one, and Slot the slot this
	// instance holds, while it holds one.
	Holders int  `json:"holders,omitempty"`
	Slot    *int `json:"slot,omitempty"`
	// Containment is what holds the command's processes together.
	Containment *Containment `json:"containment,omitempty"`
	// Checks are the health and eligibility checks' last verdicts.
	Checks map[string]Check `json:"checks,omitempty"`
}

// Containment is "cgroup", with this instance's cgroup directory (one
// cgroup per child below it), or "process-group", and why.
type Containment struct {
	Mode   string `json:"mode"`
	Cgroup string `json:"cgroup,omitempty"`
	Reason string `json:"reason"`
}

func (m *Monitor) Snapshot() Instance {
	healthy, leading := m.Healthy(), m.Leading()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Instance{Election: m.election, ID: m.id, Role: m.role, Healthy: healthy, Leading: leading,
		Key: m.key, Rev: m.rev, ChildPid: m.childPid}
	if m.lease != 0 {
		s.Lease = fmt.Sprintf("%x", m.lease)
	}
	if m.containment.Mode != "" {
		c := m.containment
		s.Containment = &c
	}
	if len(m.checks) > 0 {
		s.Checks = maps.Clone(m.checks)
	}
	if m.holders > 1 {
		s.Holders = m.holders
		if m.slot >= 0 {
			slot := m.slot
			s.Slot = &slot
		}
	}
	return s
}

// Serve listens at once, so a bad address fails the start, and serves
// until the returned close function is called. It returns the address it
// listens on, with the port the system chose for port 0.
func Serve(addr string, m *Monitor) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--status-addr: %v", err)
	}
	srv := &http.Server{Handler: Handler(m), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// Handler serves /healthz, /leader, /status and /metrics for m.
func Handler(m *Monitor) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		ok, why := m.Health()
		answer(w, ok, why, why)
	})
	mux.HandleFunc("/leader", func(w http.ResponseWriter, _ *http.Request) {
		answer(w, m.Leading(), "leading", "not leading")
	})
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(m.Snapshot())
	})
	// TYPE lines let a scraper tell counters from gauges. The switch is the
	// library's and global; etcdlead is its only user in the process.
	vm.ExposeMetadata(true)
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if m.m.writeTo(w) != nil {
			return
		}
		// Read now, not kept: without --status-addr nothing reads them.
		_, _ = writeRuntime(w)
	})
	return mux
}

func answer(w http.ResponseWriter, ok bool, yes, no string) {
	if ok {
		fmt.Fprintln(w, yes)
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintln(w, no)
}
