package main

import (
	"os"
	"sync"
	"time"

	"github.com/etcdlead/etcdlead/supervisor"
)

// standby holds a keeper started while this candidate is next in line, so
// that winning costs a pipe message rather than an exec of etcdlead (about
// 12 ms of process start and package initialisation on the handoff path).
// Only the candidate at the front keeps one: a long queue does not pay for
// idle keepers.
type standby struct {
	mu      sync.Mutex
	key     string // the term it was prepared for
	pending *supervisor.Pending
}

// Front implements campaign.Observer; it runs on the campaign's goroutine.
func (r *runner) Front(key string) {
	p, err := supervisor.Prepare(r.spec())
	if err != nil {
		r.log.Debug("no standby keeper; starting one when elected", "error", err)
		return
	}
	r.standby.mu.Lock()
	old := r.standby.pending
	r.standby.key, r.standby.pending = key, p
	r.standby.mu.Unlock()
	if old != nil {
		old.Cancel()
	}
}

// take returns the standby keeper prepared for key, if any; one prepared for
// another term is cancelled.
func (s *standby) take(key string) *supervisor.Pending {
	s.mu.Lock()
	p, k := s.pending, s.key
	s.pending, s.key = nil, ""
	s.mu.Unlock()
	if p != nil && k != key {
		p.Cancel()
		return nil
	}
	return p
}

func (r *runner) spec() supervisor.Spec {
	return supervisor.Spec{
		Path: r.rc.path, Argv: r.rc.argv, Env: baseEnv(os.Environ()),
		KillSignal: r.rc.killSignal, KillTimeout: r.rc.timing.KillTimeout, FenceMargin: r.rc.timing.FenceMargin,
		LogLevel: r.rc.logLevel, LogJSON: r.rc.logJSON,
	}
}

// Renewed, BarrierWait and Queued pass campaign events to the monitor.
func (r *runner) Renewed(latency time.Duration, err error) { r.mon.Renewed(latency, err) }
func (r *runner) BarrierWait()                             { r.mon.BarrierWait() }
func (r *runner) Queued(key string)                        { r.mon.Queued(key) }
