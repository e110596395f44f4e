package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/signals"
	"github.com/etcdlead/etcdlead/supervisor"
)

// termEnd says how a term ended: exit with err, or campaign again.
type termEnd struct {
	exit bool
	err  error
}

func exitWith(err error) termEnd { return termEnd{exit: true, err: err} }

var again = termEnd{}

// termState is what happened while the child ran.
type termState struct {
	stopSignal syscall.Signal // a stop signal came (the first one)
	lost       error          // leadership ended under the child
	timedOut   bool           // --timeout fired
}

// lead runs the child for one term and ends the term: the child's whole
// group is gone before the lease is revoked.
func (r *runner) lead(term *campaign.Term) termEnd {
	defer term.Revoke()
	r.mon.elected(term.Key, term.Rev, int64(term.Lease))
	child, err := r.startChild(term)
	if err != nil {
		var execErr *supervisor.ExecError
		switch {
		case errors.Is(err, supervisor.ErrPastFence):
			// Frozen or delayed between the confirmation and the fork: the
			// lease may end before the child could be stopped in order.
			// No child ran, so the term is lost, not failed.
			r.mon.termEnded("past-fence")
			r.log.Warn("term lost before the child started; campaigning again", "error", err)
			return again
		case errors.As(err, &execErr):
			r.mon.termEnded("start-failed")
			return exitWith(withCode(execErr.Code, execErr))
		}
		r.mon.termEnded("start-failed")
		return exitWith(failf("%v", err))
	}
	elected := time.Now()
	r.log.Info("child started", "pid", child.Pid(), "rev", term.Rev)
	r.mon.childStarted(child.Pid())

	hctx, hcancel := context.WithCancel(context.Background())
	held := make(chan error, 1)
	go func() { held <- term.Hold(hctx, child.SetDeadline) }()
	holding := true
	defer func() {
		hcancel()
		if holding {
			<-held
		}
	}()
	var timeout <-chan time.Time
	if r.rc.timeout > 0 {
		t := time.NewTimer(r.rc.timeout)
		defer t.Stop()
		timeout = t.C
	}

	var st termState
	for {
		select {
		case s := <-r.sigs.C:
			r.onSignal(s.(syscall.Signal), child, &st)
		case err := <-held:
			holding = false
			if st.stopSignal == 0 && st.lost == nil && !st.timedOut {
				// Stop first: a log write can block on a stalled stderr.
				child.Stop(r.rc.killSignal)
				st.lost = err
				r.log.Warn("leadership lost; child stopping", "reason", err, "signal", signals.Name(r.rc.killSignal))
			}
		case <-timeout:
			if st.stopSignal != 0 || st.lost != nil {
				break // a stop is under way; its cause came first
			}
			child.Stop(r.rc.killSignal)
			st.timedOut = true
			r.log.Warn("command ran past --timeout; child stopping", "timeout", r.rc.timeout, "signal", signals.Name(r.rc.killSignal))
		case <-child.Done():
			res := child.Result()
			r.log.Info("child exited", "status", res.Code, "reason", res.Reason)
			r.mon.childExited(res.Code, res.Reason == supervisor.ReasonFenced)
			end := r.afterChild(res, st)
			if end.exit && res.Reason == supervisor.ReasonExited && st == (termState{}) && holding {
				r.holdRest(held, &holding, elected)
			}
			return end
		}
	}
}

// startChild starts the child under the standby keeper if one waits for
// this term, else under a fresh keeper.
func (r *runner) startChild(term *campaign.Term) (*supervisor.Child, error) {
	log := r.log.Named("supervisor")
	if p := r.standby.take(); p != nil {
		return p.Start(term.Deadline(), termEnv(r.rc, term), log)
	}
	spec := r.spec()
	spec.Env = childEnv(os.Environ(), r.rc, term)
	spec.Deadline = term.Deadline()
	return supervisor.Start(spec, log)
}

func (r *runner) onSignal(sig syscall.Signal, child *supervisor.Child, st *termState) {
	switch signals.Classify(sig) {
	case signals.Stop:
		if st.stopSignal != 0 {
			child.Kill()
			r.log.Warn("second stop signal: killing the child's group", "signal", signals.Name(sig))
			return
		}
		child.Stop(sig)
		st.stopSignal = sig
		r.mon.setRole(roleStopping)
		r.log.Info("child stopping", "signal", signals.Name(sig), "kill_timeout", r.rc.timing.KillTimeout)
	case signals.Forward:
		child.Signal(sig)
		r.log.Debug("forwarded signal", "signal", signals.Name(sig))
	case signals.Ignore:
		r.log.Info("signal ignored: a stopped supervisor would lose its lease", "signal", signals.Name(sig))
	}
}

// afterChild maps how the child ended to what etcdlead does next.
func (r *runner) afterChild(res supervisor.Result, st termState) termEnd {
	switch {
	case st.stopSignal != 0:
		r.mon.termEnded("stopped")
		return exitWith(withCode(res.Code, nil))
	case st.timedOut:
		r.mon.termEnded("timeout")
		return exitWith(withCode(exitTimeout, nil))
	case campaign.Permanent(st.lost):
		// etcd refuses what the term needs (a permission taken away):
		// campaigning again would only lose again.
		r.mon.termEnded("refused")
		return exitWith(failf("%v", st.lost))
	case res.Reason == supervisor.ReasonFenced || st.lost != nil:
		reason := lostReason(st.lost, res)
		r.mon.termEnded(reason)
		if r.rc.once {
			r.log.Warn("leadership lost while the command ran; exiting (--once)", "reason", reason, "exit_code", exitLostOnce)
			return exitWith(withCode(exitLostOnce, nil))
		}
		return again
	case res.Reason == supervisor.ReasonKeeperLost:
		r.mon.termEnded("keeper-lost")
		return exitWith(failf("the keeper process died; the child and every process it left were killed"))
	}
	r.mon.termEnded("exited")
	if r.rc.restart == "always" || (r.rc.restart == "on-failure" && res.Code != 0) {
		r.log.Info("campaigning again (--restart)", "restart", r.rc.restart, "status", res.Code)
		return again
	}
	return exitWith(withCode(res.Code, nil))
}

func lostReason(lost error, res supervisor.Result) string {
	switch {
	case errors.Is(lost, campaign.ErrResigned):
		return "resigned"
	case errors.Is(lost, campaign.ErrKeyDeleted):
		return "key-deleted"
	case errors.Is(lost, campaign.ErrKeyReplaced):
		return "key-replaced"
	case errors.Is(lost, campaign.ErrLeaseLost):
		return "lease-lost"
	case res.Reason == supervisor.ReasonFenced:
		return "fenced"
	}
	return fmt.Sprint("lost: ", lost)
}

// holdRest keeps leadership until --hold-at-least has passed since the
// election, so the same cron job fired a little later on another machine
// finds a leader and does not run again. Losing leadership or a stop signal
// ends the wait.
func (r *runner) holdRest(held chan error, holding *bool, elected time.Time) {
	rest := r.rc.holdAtLeast - time.Since(elected)
	if rest <= 0 {
		return
	}
	r.log.Info("holding leadership (--hold-at-least)", "for", rest.Round(time.Millisecond))
	r.mon.setRole(roleHolding)
	t := time.NewTimer(rest)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return
		case err := <-held:
			*holding = false
			r.log.Warn("leadership lost while holding", "reason", err)
			return
		case s := <-r.sigs.C:
			if signals.Classify(s) == signals.Stop {
				r.log.Info("stop signal while holding; exiting", "signal", signals.Name(s.(syscall.Signal)))
				return
			}
		}
	}
}
