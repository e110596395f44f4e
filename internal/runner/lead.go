package runner

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/internal/health"
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
// campaign again. It is a dispatcher: each event has its method on
// leading, and restart in place (restart.go), the hold after the child's
// exit (hold.go) and the checks (checks.go) have files of their own.
func (r *Runner) lead(ctx context.Context, term Leadership) *Outcome {
	l := &leading{r: r, term: term}
	// Revoked once, by end or on the way out, after the hold below.
	defer l.revokeOnce()
	if r.cfg.Won != nil {
		r.cfg.Won()
	}
	id := term.ID()
	r.mon.Elected(id.Key, id.Rev, id.Lease)
	r.mon.Holder(id.Slot, r.cfg.Campaign.Holders)
	child, o := r.startChild(term)
	if child == nil {
		return o
	}
	l.child, l.elected = child, time.Now()
	l.checks = r.startTermChecks(ctx, term)
	defer l.checks.stop() // before the revoke above
	l.hold(ctx)
	defer l.release()
	var timeout <-chan time.Time
	if r.cfg.Timeout > 0 {
		t := time.NewTimer(r.cfg.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	for {
		var childDone <-chan struct{}
		if l.child != nil {
			childDone = l.child.Done()
		}
		var (
			o    *Outcome
			done bool
		)
		select {
		case s := <-r.sigs.C:
			o, done = l.signal(s)
		case err := <-l.held:
			o, done = l.lost(err)
		case <-timeout:
			o, done = l.timedOut()
		case x := <-l.checks.eligible:
			o, done = l.ineligible(x)
		case v := <-l.checks.verdicts:
			l.unhealthy(v)
		case <-l.restartAt:
			o, done = l.restart()
		case <-childDone:
			o, done = l.childDone()
		}
		if done {
			return o
		}
	}
}

// leading is one term that lead runs: its state, and a method per event.
// A method that returns done ends the term, with its Outcome (nil:
// campaign again).
type leading struct {
	r    *Runner
	term Leadership
	// child is the command that runs: nil between a command stopped for a
	// restart in place and the next one (restarting).
	child   Child
	elected time.Time
	checks  *termChecks
	// keeper is the command whose keeper hears the term's new deadlines.
	keeper *keeperOf

	held     chan error // Lead's result
	hcancel  context.CancelFunc
	renewing bool // Lead has not returned yet
	revoked  bool

	st         termState
	restarting bool
	restartAt  <-chan time.Time // fires when the next command may start
	lastCode   int              // the status of the last command that exited
}

// hold holds the term for as long as lead runs, and lead returns only
// once Lead has returned (release): no renewal outlives the term. A
// renewal's new deadline goes to the keeper of the command that runs now:
// after a restart in place, the new one's.
func (l *leading) hold(ctx context.Context) {
	hctx, hcancel := context.WithCancel(ctx)
	l.held, l.hcancel, l.renewing = make(chan error, 1), hcancel, true
	l.keeper = &keeperOf{c: l.child}
	go func() { l.held <- l.term.Lead(hctx, l.keeper.setDeadline) }()
}

// release ends the hold and waits for Lead to return.
func (l *leading) release() {
	l.hcancel()
	if l.renewing {
		<-l.held
		l.renewing = false
	}
}

// end ends the term once the child's processes and the checks' are gone:
// the next candidate waits on End. Lead returns before the revoke, so no
// renewal follows it; one that follows End is harmless, and waiting for
// Lead first would put its return on the next candidate's way.
func (l *leading) end() {
	l.checks.stop()
	l.term.End()
	l.release()
	l.awaitKeeper()
	l.term.Revoke()
	l.revoked = true
}

// keeperExitWait bounds the revoke's wait for the keeper: one that has
// reported exits once its log is flushed, within its own bound of a
// second (supervisor/internal/keeper, keeperFlush).
const keeperExitWait = 2 * time.Second

// awaitKeeper holds the revoke until the keeper is gone too, so that the
// lease goes last, once nothing the term started is left (Term.Revoke
// keeps it out of the next leader's way). A keeper that does not exit in
// time only delays the revoke; End has freed the election already.
func (l *leading) awaitKeeper() {
	if l.child == nil {
		return
	}
	t := time.NewTimer(keeperExitWait)
	defer t.Stop()
	select {
	case <-l.child.Gone():
	case <-t.C:
		l.r.log.Warn("the keeper did not exit after its report; revoking the lease without it", "bound", keeperExitWait)
	}
}

func (l *leading) revokeOnce() {
	if !l.revoked {
		l.term.Revoke()
	}
}

// stop asks the command to stop with the kill signal.
func (l *leading) stop() { l.child.Stop(l.r.cfg.Spec.KillSignal) }

// signal acts on a caught signal (signals.Decide).
func (l *leading) signal(s os.Signal) (*Outcome, bool) {
	r := l.r
	if l.child == nil {
		if r.onSignal(s, signals.BackingOff, nil) == signals.Exit {
			l.end()
			r.mon.TermEnded(ops.ReasonStopped)
			return end(Stopped, l.lastCode, nil), true
		}
		return nil, false
	}
	phase := signals.Leading
	if l.st.stopped {
		phase = signals.Stopping
	}
	if r.onSignal(s, phase, l.child) == signals.StopChild {
		l.st.stopped = true
	}
	return nil, false
}

// lost is the end of Lead: the term is lost, resigned or paused.
func (l *leading) lost(err error) (*Outcome, bool) {
	r := l.r
	l.renewing = false
	if l.child == nil {
		r.logTermEnd(err, "while the command was down for a restart")
		l.end()
		return r.afterChild(supervisor.Result{Code: l.lastCode, Reason: supervisor.ReasonStopped}, termState{lost: err}), true
	}
	if !l.st.stopping() {
		// Stop first: a log write can block on a stalled stderr.
		l.child.Stop(r.cfg.Spec.KillSignal)
		r.log.Trace("stop sent to keeper")
		l.st.lost = err
		r.logTermEnd(err, "child stopping", "signal", signals.Name(r.cfg.Spec.KillSignal))
	}
	return nil, false
}

// timedOut is --timeout.
func (l *leading) timedOut() (*Outcome, bool) {
	r := l.r
	if l.st.stopped || l.st.lost != nil {
		return nil, false // a stop is under way; its cause came first
	}
	l.st.timedOut = true
	if l.child == nil {
		l.end()
		r.mon.TermEnded(ops.ReasonTimeout)
		return end(TimedOut, l.lastCode, nil), true
	}
	l.stop()
	r.log.Warn("command ran past --timeout; child stopping", "timeout", r.cfg.Timeout, "signal", signals.Name(r.cfg.Spec.KillSignal))
	return nil, false
}

// ineligible is --eligible-cmd's failure: the term steps down.
func (l *leading) ineligible(x health.Result) (*Outcome, bool) {
	r := l.r
	if l.st.stopping() {
		return nil, false
	}
	l.st.lost = errIneligible
	if l.child == nil {
		l.end()
		return r.afterChild(supervisor.Result{Code: l.lastCode, Reason: supervisor.ReasonStopped}, l.st), true
	}
	l.stop()
	r.log.Warn("no longer eligible (--eligible-cmd); stepping down, child stopping", "check", x.Summary(),
		"signal", signals.Name(r.cfg.Spec.KillSignal))
	return nil, false
}

// childDone is the command's end: a restart in place, or the term's end
// (with --hold-at-least, after the hold).
func (l *leading) childDone() (*Outcome, bool) {
	r := l.r
	r.log.Trace("child done")
	res := l.child.Result()
	if l.restartsAfter(res) {
		return nil, false
	}
	// The command is gone: nothing is left to check, also while
	// --hold-at-least holds the term.
	l.checks.stopHealth()
	// Only a child that simply ended, in a term still held, may leave its
	// term held on by --hold-at-least (holdRest); every other term ends
	// now.
	mayHold := res.Reason == supervisor.ReasonExited && l.st == (termState{}) && !l.restarting && l.renewing
	// Said before the revoke, which may wait out an unreachable etcd: the
	// log never blocks (internal/logbuf).
	r.log.Info("child exited", "status", res.Code, "reason", res.Reason)
	r.mon.ChildExited(res.Code, res.Reason == supervisor.ReasonFenced)
	if r.cfg.RunRetry && !(res.Reason == supervisor.ReasonExited && res.Code == 0 && l.st == termState{}) {
		// The child and its descendants are gone: the firing may run
		// again, here or on another candidate.
		l.term.ForgetRun()
	}
	if !mayHold || time.Since(l.elected) >= r.cfg.HoldAtLeast {
		l.end()
	}
	o := r.afterChild(res, l.st)
	if o != nil && mayHold && l.renewing {
		l.holdAfterExit()
	}
	return o, true
}

// startChild starts the term's command. A nil child comes with the
// outcome: nil to campaign again.
func (r *Runner) startChild(term Leadership) (Child, *Outcome) {
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
			term.ForgetRun()
			r.lost = true
			return nil, nil
		case errors.As(err, &execErr):
			r.mon.TermEnded(ops.ReasonStartFailed)
			return nil, end(ExecFailed, execErr.Code, execErr)
		}
		r.mon.TermEnded(ops.ReasonStartFailed)
		return nil, end(Failed, 0, err)
	}
	id := term.ID()
	if r.cfg.Campaign.Holders > 1 {
		r.log.Info("child started as holder", "pid", child.Pid(), "rev", id.Rev, "slot", id.Slot,
			"slot_rev", id.SlotRev, "holders", r.cfg.Campaign.Holders)
	} else {
		r.log.Info("child started", "pid", child.Pid(), "rev", id.Rev)
	}
	r.mon.ChildStarted(child.Pid())
	r.notes.set(ops.HookLeader, ops.ReasonElected, id.Rev)
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
	if r.cfg.Interactive && res.Signaled && res.Code == exitcode.Signal(syscall.SIGINT) {
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
	if r.cfg.Campaign.Holders > 1 {
		return "holder lost its slot"
	}
	return "leadership lost"
}
