package runner

import (
	"sync"
	"time"

	"github.com/etcdlead/etcdlead/signals"
	"github.com/etcdlead/etcdlead/supervisor"
)

// unhealthy acts on the health check's verdict: the command is stopped,
// and either the term steps down or the command is restarted in place
// (docs/checks.md), after the damping's delay.
func (l *leading) unhealthy(v verdict) {
	r := l.r
	if l.st.stopping() || l.restarting || l.child == nil || !l.checks.current(v) {
		return
	}
	r.dampingAfterQuiet()
	l.checks.stopHealth()
	l.stop()
	// A command that runs once (--once, --run-id) is never started a
	// second time in place.
	if v.stepDown || r.cfg.Once || r.cfg.Campaign.RunID != "" {
		l.st.lost = errUnhealthy
		r.log.Warn("the command is unhealthy; stepping down for a waiting candidate, child stopping", "check", v.res.Summary(),
			"signal", signals.Name(r.cfg.Spec.KillSignal))
		return
	}
	l.restarting = true
	why := "--health-action=restart"
	if !r.cfg.Health.Restart {
		why = "no other candidate waits"
	}
	r.log.Warn("the command is unhealthy; restarting it in place, child stopping", "check", v.res.Summary(), "because", why,
		"signal", signals.Name(r.cfg.Spec.KillSignal))
}

// restartsAfter takes the end of a command stopped for a restart in
// place: the next one starts after the damping's delay (restart). A
// command fenced, or whose keeper died, ends the term instead, as does any
// stop under way.
func (l *leading) restartsAfter(res supervisor.Result) bool {
	r := l.r
	if !l.restarting || l.st.stopping() || res.Reason == supervisor.ReasonFenced || res.Reason == supervisor.ReasonKeeperLost {
		return false
	}
	l.restarting = false
	l.lastCode = res.Code
	r.log.Info("child exited", "status", res.Code, "reason", res.Reason)
	r.mon.ChildExited(res.Code, false)
	d := r.restarts.NextBackOff()
	r.log.Info("restarting the command in place", "in", d)
	l.child, l.restartAt = nil, time.After(d)
	return true
}

// restart starts the next command of a restart in place, whose keeper
// hears the term's deadlines from then on.
func (l *leading) restart() (*Outcome, bool) {
	l.restartAt = nil
	child, o := l.r.startChild(l.term)
	if child == nil {
		l.end()
		return o, true
	}
	l.child = child
	l.keeper.set(child, l.term.Deadline())
	l.checks.startHealth()
	return nil, false
}

// keeperOf is the command that runs now, whose keeper hears the term's
// new deadlines.
type keeperOf struct {
	mu sync.Mutex
	c  Child
}

func (k *keeperOf) setDeadline(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.c.SetDeadline(d)
}

// set makes c the command to tell, and tells it deadline, the term's now:
// a renewal between c's start and this call went to the command before.
func (k *keeperOf) set(c Child, deadline time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.c = c
	c.SetDeadline(deadline)
}
