package runner

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/ops"
	"github.com/etcdlead/etcdlead/signals"
	"github.com/etcdlead/etcdlead/supervisor"
)

// termState is what happened while the child ran.
type termState struct {
	stopped  bool  // a stop signal was obeyed
	lost     error // leadership ended under the child
	timedOut bool  // --timeout fired
}

func (st termState) stopping() bool { return st.stopped || st.lost != nil || st.timedOut }

// lead runs the child for one term and ends the term: the child's whole
// group, and every check's, is gone before the lease is revoked. nil means
// campaign again.
func (r *Runner) lead(ctx context.Context, term *Leadership) *Outcome {
	// Revoked once, by endTerm or on the way out, after the hold below.
	revoked := false
	defer func() {
		if !revoked {
			term.Revoke()
		}
	}()
	if r.cfg.Won != nil {
		r.cfg.Won()
	}
	r.mon.Elected(term.Key, term.Rev, term.Lease)
	r.mon.Holder(term.Slot, r.cfg.Holders)
	child, o := r.startChild(term)
	if child == nil {
		return o
	}
	elected := time.Now()
	checks := r.startTermChecks(ctx, term)
	defer checks.stop() // before the revoke above

	// The term is held for as long as lead runs, and lead returns only
	// once Lead has returned: no renewal outlives the term.
	hctx, hcancel := context.WithCancel(ctx)
	held := make(chan error, 1)
	// A renewal's new deadline goes to the keeper of the command that
	// runs now: after a restart in place, the new one's.
	keeper := &keeperOf{c: child}
	go func() { held <- term.Lead(hctx, keeper.setDeadline) }()
	renewing := true
	defer func() {
		hcancel()
		if renewing {
			<-held
		}
	}()
	// endTerm revokes the term once the child's processes and the checks'
	// are gone: the next candidate waits on the revoke. Lead returns
	// first, so no renewal follows the revoke.
	endTerm := func() {
		checks.stop()
		hcancel()
		if renewing {
			<-held
			renewing = false
		}
		term.Revoke()
		revoked = true
	}
	var timeout <-chan time.Time
	if r.cfg.Timeout > 0 {
		t := time.NewTimer(r.cfg.Timeout)
		defer t.Stop()
		timeout = t.C
	}

	var st termState
	// Between a command stopped for a restart in place and the next one,
	// child is nil and restartAt fires when the next may start.
	restarting := false
	var restartAt <-chan time.Time
	lastCode := 0
	for {
		var childDone <-chan struct{}
		if child != nil {
			childDone = child.Done()
		}
		select {
		case s := <-r.sigs.C:
			if child == nil {
				if r.onSignal(s, signals.BackingOff, nil) == signals.Exit {
					endTerm()
					r.mon.TermEnded(ops.ReasonStopped)
					return end(Stopped, lastCode, nil)
				}
				break
			}
			phase := signals.Leading
			if st.stopped {
				phase = signals.Stopping
			}
			if r.onSignal(s, phase, child) == signals.StopChild {
				st.stopped = true
			}
		case err := <-held:
			renewing = false
			if child == nil {
				r.logTermEnd(err, "while the command was down for a restart")
				endTerm()
				return r.afterChild(supervisor.Result{Code: lastCode, Reason: supervisor.ReasonStopped}, termState{lost: err})
			}
			if !st.stopping() {
				// Stop first: a log write can block on a stalled stderr.
				child.Stop(r.cfg.KillSignal)
				r.log.Trace("stop sent to keeper")
				st.lost = err
				r.logTermEnd(err, "child stopping", "signal", signals.Name(r.cfg.KillSignal))
			}
		case <-timeout:
			if st.stopped || st.lost != nil {
				break // a stop is under way; its cause came first
			}
			st.timedOut = true
			if child == nil {
				endTerm()
				r.mon.TermEnded(ops.ReasonTimeout)
				return end(TimedOut, lastCode, nil)
			}
			child.Stop(r.cfg.KillSignal)
			r.log.Warn("command ran past --timeout; child stopping", "timeout", r.cfg.Timeout, "signal", signals.Name(r.cfg.KillSignal))
		case x := <-checks.eligible:
			if st.stopping() {
				break
			}
			st.lost = errIneligible
			if child == nil {
				endTerm()
				return r.afterChild(supervisor.Result{Code: lastCode, Reason: supervisor.ReasonStopped}, st)
			}
			child.Stop(r.cfg.KillSignal)
			r.log.Warn("no longer eligible (--eligible-cmd); stepping down, child stopping", "check", x.Summary(),
				"signal", signals.Name(r.cfg.KillSignal))
		case v := <-checks.verdicts:
			if st.stopping() || restarting || child == nil || !checks.current(v) {
				break
			}
			r.dampingAfterQuiet()
			checks.stopHealth()
			child.Stop(r.cfg.KillSignal)
			// A command that runs once (--once, --run-id) is never
			// started a second time in place.
			if v.stepDown || r.cfg.Once || r.cfg.RunID != "" {
				st.lost = errUnhealthy
				r.log.Warn("the command is unhealthy; stepping down for a waiting candidate, child stopping", "check", v.res.Summary(),
					"signal", signals.Name(r.cfg.KillSignal))
				break
			}
			restarting = true
			why := "--health-action=restart"
			if !r.cfg.Health.Restart {
				why = "no other candidate waits"
			}
			r.log.Warn("the command is unhealthy; restarting it in place, child stopping", "check", v.res.Summary(), "because", why,
				"signal", signals.Name(r.cfg.KillSignal))
		case <-restartAt:
			restartAt = nil
			if child, o = r.startChild(term); child == nil {
				endTerm()
				return o
			}
			keeper.set(child, term.Deadline())
			checks.startHealth()
		case <-childDone:
			r.log.Trace("child done")
			res := child.Result()
			if restarting && !st.stopping() && res.Reason != supervisor.ReasonFenced && res.Reason != supervisor.ReasonKeeperLost {
				restarting = false
				lastCode = res.Code
				r.log.Info("child exited", "status", res.Code, "reason", res.Reason)
				r.mon.ChildExited(res.Code, false)
				d := r.restarts.NextBackOff()
				r.log.Info("restarting the command in place", "in", d)
				child, restartAt = nil, time.After(d)
				break
			}
			// The command is gone: nothing is left to check, also while
			// --hold-at-least holds the term.
			checks.stopHealth()
			// Only a child that simply ended, in a term still held, may
			// leave its term held on by --hold-at-least (holdRest below);
			// every other term ends now.
			mayHold := res.Reason == supervisor.ReasonExited && st == (termState{}) && !restarting && renewing
			// Said before the revoke, which may wait out an unreachable
			// etcd: the log never blocks (internal/logbuf).
			r.log.Info("child exited", "status", res.Code, "reason", res.Reason)
			r.mon.ChildExited(res.Code, res.Reason == supervisor.ReasonFenced)
			if r.cfg.RunRetry && !(res.Reason == supervisor.ReasonExited && res.Code == 0 && st == termState{}) {
				// The child and its descendants are gone: the firing may
				// run again, here or on another candidate.
				forgetRun(term)
			}
			if !mayHold || time.Since(elected) >= r.cfg.HoldAtLeast {
				endTerm()
			}
			o := r.afterChild(res, st)
			if o != nil && mayHold && renewing {
				if r.holdRest(held, elected) {
					renewing = false
				}
			}
			return o
		}
	}
}

// startChild starts the term's command. A nil child comes with the
// outcome: nil to campaign again.
func (r *Runner) startChild(term *Leadership) (Child, *Outcome) {
	child, err := r.keepers.Start(term.Deadline(), r.termEnv(term))
	if err != nil {
		var execErr *supervisor.ExecError
		switch {
		case errors.Is(err, supervisor.ErrPastFence):
			// Frozen or delayed between the confirmation and the fork: the
			// lease may end before the child could be stopped in order.
			// No child ran, so the term is lost, not failed.
			r.mon.TermEnded(ops.ReasonPastFence)
			r.log.Warn("term lost before the child started; campaigning again", "error", err)
			forgetRun(term)
			r.lost = true
			return nil, nil
		case errors.As(err, &execErr):
			r.mon.TermEnded(ops.ReasonStartFailed)
			return nil, end(ExecFailed, execErr.Code, execErr)
		}
		r.mon.TermEnded(ops.ReasonStartFailed)
		return nil, end(Failed, 0, err)
	}
	if r.cfg.Holders > 1 {
		r.log.Info("child started as holder", "pid", child.Pid(), "rev", term.Rev, "slot", term.Slot,
			"slot_rev", term.SlotRev, "holders", r.cfg.Holders)
	} else {
		r.log.Info("child started", "pid", child.Pid(), "rev", term.Rev)
	}
	r.mon.ChildStarted(child.Pid())
	r.notes.set(ops.HookLeader, ops.ReasonElected, term.Rev)
	return child, nil
}

// afterChild maps how the child ended to what the run does next: nil means
// campaign again.
func (r *Runner) afterChild(res supervisor.Result, st termState) *Outcome {
	switch {
	case st.stopped:
		r.mon.TermEnded(ops.ReasonStopped)
		return end(Stopped, res.Code, nil)
	case st.timedOut:
		r.mon.TermEnded(ops.ReasonTimeout)
		return end(TimedOut, res.Code, nil)
	case campaign.Permanent(st.lost):
		// etcd refuses what the term needs (a permission taken away):
		// campaigning again would only lose again.
		r.mon.TermEnded(ops.ReasonRefused)
		return end(Refused, 0, st.lost)
	case res.Reason == supervisor.ReasonFenced || st.lost != nil:
		reason := lostReason(st.lost, res)
		r.mon.TermEnded(reason)
		r.resigned = reason == ops.ReasonResigned || reason == ops.ReasonPaused || reason == ops.ReasonIneligible
		r.unhealthy = reason == ops.ReasonUnhealthy
		r.lost = !r.resigned && !r.unhealthy
		if reason == ops.ReasonPaused {
			r.log.Info("stopped the command: the election is paused")
			if r.cfg.Once {
				return end(NotLeader, res.Code, nil)
			}
			return nil
		}
		if r.cfg.Once {
			if reason == ops.ReasonResigned {
				r.log.Info("stepped down on request while the command ran; exiting (--once)")
			} else {
				r.log.Warn(r.lostWords()+" while the command ran; exiting (--once)", "reason", reason)
			}
			return end(LostOnce, res.Code, nil)
		}
		return nil
	case res.Reason == supervisor.ReasonKeeperLost:
		r.mon.TermEnded(ops.ReasonKeeperLost)
		return end(KeeperLost, res.Code, errors.New("the keeper process died; the child and every process it left were killed"))
	}
	r.mon.TermEnded(ops.ReasonExited)
	if r.cfg.Interactive && res.Signaled && res.Code == supervisor.SignalExit(syscall.SIGINT) {
		// Ctrl-C on the terminal reaches the child, not etcdlead: the user
		// asked the run to end, not for the command to start again.
		r.log.Info("the command died of SIGINT from the terminal (Ctrl-C); exiting")
		return end(Stopped, res.Code, nil)
	}
	if r.cfg.Restart == RestartAlways || (r.cfg.Restart == RestartOnFailure && res.Code != 0) {
		r.log.Info("campaigning again (--restart)", "restart", r.cfg.Restart, "status", res.Code)
		return nil
	}
	return end(ChildExited, res.Code, nil)
}

func lostReason(lost error, res supervisor.Result) string {
	switch {
	case errors.Is(lost, campaign.ErrResigned):
		return ops.ReasonResigned
	case errors.Is(lost, campaign.ErrPaused):
		return ops.ReasonPaused
	case errors.Is(lost, errUnhealthy):
		return ops.ReasonUnhealthy
	case errors.Is(lost, errIneligible):
		return ops.ReasonIneligible
	case errors.Is(lost, campaign.ErrKeyDeleted):
		return ops.ReasonKeyDeleted
	case errors.Is(lost, campaign.ErrKeyReplaced):
		return ops.ReasonKeyReplaced
	case errors.Is(lost, campaign.ErrLeaseLost):
		return ops.ReasonLeaseLost
	case res.Reason == supervisor.ReasonFenced:
		return ops.ReasonFenced
	}
	return ops.ReasonLost
}

// logTermEnd says why a held term ended: an operator's resign is a step
// down on request, not a loss.
func (r *Runner) logTermEnd(err error, what string, args ...any) {
	if errors.Is(err, campaign.ErrResigned) {
		r.log.Info("stepped down on request; "+what, args...)
		return
	}
	if errors.Is(err, campaign.ErrPaused) {
		r.log.Info("election paused; "+what, args...)
		return
	}
	r.log.Warn(r.lostWords()+"; "+what, append([]any{"reason", err}, args...)...)
}

// lostWords name a lost term: a leader's, or with --holders N > 1 a
// holder's.
func (r *Runner) lostWords() string {
	if r.cfg.Holders > 1 {
		return "holder lost its slot"
	}
	return "leadership lost"
}

// holdRest keeps leadership until --hold-at-least has passed since the
// election, so the same cron job fired a little later on another machine
// finds a leader and does not run again. Losing leadership or a stop signal
// ends the wait. It reports whether Hold has returned (its result was
// taken from held).
func (r *Runner) holdRest(held <-chan error, elected time.Time) bool {
	rest := r.cfg.HoldAtLeast - time.Since(elected)
	if rest <= 0 {
		return false
	}
	r.log.Info("holding leadership (--hold-at-least)", "for", rest.Round(time.Millisecond))
	r.mon.SetRole(ops.RoleHolding)
	t := time.NewTimer(rest)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return false
		case err := <-held:
			r.logTermEnd(err, "while holding")
			return true
		case s := <-r.sigs.C:
			if r.onSignal(s, signals.Holding, nil) == signals.Exit {
				return false
			}
		}
	}
}

// forgetRun takes back the term's record of the run id, if any.
func forgetRun(term *Leadership) {
	if term.ForgetRun != nil {
		term.ForgetRun()
	}
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
