package main

import (
	"os"
	"sync"
	"time"

	"github.com/etcdlead/etcdlead/supervisor"
)

// standby holds a keeper started ahead of need, so that winning costs a
// pipe message rather than an exec of etcdlead (process start and package
// initialisation on the handoff path). A keeper carries nothing of a term
// until it is started, so one serves any term. A campaign starts one at
// once, so that it warms up while etcd is dialled. A candidate keeps it when
// at most two terms are ahead of it, and otherwise drops it until a read
// shows it next in line: its wait watches only the term just ahead, so a
// candidate two places back learns nothing when the leader leaves, and
// would find itself next with no keeper ready; further back, a long queue
// does not pay for idle keepers.
type standby struct {
	mu      sync.Mutex
	pending *supervisor.Pending
}

// prepare starts a standby keeper unless one waits already.
func (r *runner) prepare() {
	r.standby.mu.Lock()
	defer r.standby.mu.Unlock()
	if r.standby.pending != nil {
		return
	}
	p, err := supervisor.Prepare(r.spec())
	if err != nil {
		r.log.Debug("no standby keeper; starting one when elected", "error", err)
		return
	}
	r.standby.pending = p
}

// take hands over the standby keeper, if any.
func (s *standby) take() *supervisor.Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending
	s.pending = nil
	return p
}

// drop ends the standby keeper, if any.
func (s *standby) drop() {
	if p := s.take(); p != nil {
		p.Cancel()
	}
}

// Front implements campaign.Observer: next in line.
func (r *runner) Front(string) { r.prepare() }

// Queued implements campaign.Observer.
func (r *runner) Queued(key string, ahead int) {
	r.mon.Queued(key)
	if ahead > 2 {
		r.standby.drop()
	}
}

func (r *runner) spec() supervisor.Spec {
	return supervisor.Spec{
		Path: r.rc.path, Argv: r.rc.argv, Env: baseEnv(os.Environ()),
		KillSignal: r.rc.killSignal, KillTimeout: r.rc.timing.KillTimeout, FenceMargin: r.rc.timing.FenceMargin,
		LogLevel: r.rc.logLevel, LogJSON: r.rc.logJSON,
	}
}

// Renewed and BarrierWait pass campaign events to the monitor.
func (r *runner) Renewed(latency time.Duration, err error) { r.mon.Renewed(latency, err) }
func (r *runner) BarrierWait()                             { r.mon.BarrierWait() }
