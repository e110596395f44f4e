package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/health"
	"github.com/etcdlead/etcdlead/internal/ops"
	"github.com/etcdlead/etcdlead/signals"
)

// stableTerm is how long a term must last for the backoff to start afresh.
const stableTerm = time.Minute

// errStopped is a stop signal received while no child ran.
var errStopped = errors.New("stopped by signal")

// Run is the term loop (docs/design.md, "One term, step by step"):
// campaign, lead, and unless the options say to end, back off and campaign
// again. It returns how the run ended, never nil, and only once the
// --notify command, if any, has been told (and no run of it is left). ctx
// ending stops the run as a stop signal would.
func (r *Runner) Run(ctx context.Context) *Outcome {
	r.notes = r.startNotifier()
	o := r.run(ctx)
	r.notes.close(o.Kind.String())
	return o
}

func (r *Runner) run(ctx context.Context) *Outcome {
	defer r.keepers.Drop()
	b := newBackoff(r.cfg.Campaign.Timing.TTL)
	r.mon.Say("connecting to etcd")
	for {
		if o := r.awaitEligible(ctx); o != nil {
			return o
		}
		term, err := r.campaign(ctx)
		r.resigned = false
		if err != nil {
			if o := r.campaignFailed(err); o != nil {
				return o
			}
		} else {
			r.waitUntil = time.Time{}
			started := time.Now()
			if o := r.lead(ctx, term); o != nil {
				return o
			}
			// The term's processes are all gone: told only now.
			r.notes.set(ops.HookFollower, r.mon.LastEnded(), 0)
			if time.Since(started) > stableTerm {
				b.Reset()
			}
		}
		if r.resigned {
			// A resign or a pause is an operator's request, not a
			// failure: its lease is revoked, and the candidate queues
			// again at once, at the back (after a pause, once it is
			// lifted). So does one no longer eligible, once it is again.
			// The backoff is for what failed.
			continue
		}
		if r.unhealthy {
			r.unhealthy = false
			if err := r.sitOutSick(ctx); err != nil {
				return end(Stopped, 0, nil)
			}
			continue
		}
		if r.lost {
			r.lost = false
			b.Reset()
		}
		if err := r.pause(ctx, b.NextBackOff()); err != nil {
			return end(Stopped, 0, nil)
		}
	}
}

// newBackoff is the pause before a campaign after a failed one, a lost
// term or a child's exit under --restart: exponential, so that a child that
// keeps failing, or an etcd that keeps refusing, is not hammered. It is
// capped low, at half the TTL up to 5 s: while it backs off a candidate is
// not in the queue, and with every candidate backing off the election has
// no leader. A lost term resets it (Runner.lost): after an etcd fault
// every candidate's terms may be lost at once, fault after fault, and a
// backoff grown over them would leave the election leaderless for its
// length once etcd is back. A term that lasts a minute resets it too.
func newBackoff(ttl time.Duration) *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 500 * time.Millisecond
	b.MaxInterval = max(b.InitialInterval, min(5*time.Second, ttl/2))
	b.MaxElapsedTime = 0 // a daemon must outlive any etcd outage
	b.Reset()
	return b
}

// campaignFailed decides whether a failed campaign ends the run: nil means
// campaign again.
func (r *Runner) campaignFailed(err error) *Outcome {
	switch {
	case errors.Is(err, errStopped):
		return end(Stopped, 0, nil)
	case campaign.Permanent(err):
		return end(Refused, 0, err)
	case errors.Is(err, campaign.ErrPaused):
		return r.pausedEnd()
	case errors.Is(err, campaign.ErrRunDone):
		r.log.Info("this firing ran already; exiting", "reason", err)
		return end(NotLeader, 0, nil)
	case errors.Is(err, campaign.ErrNotLeader):
		opt := "--no-wait"
		if !r.cfg.Campaign.NoWait {
			opt = "--wait " + r.cfg.Wait.String()
		}
		r.log.Info("not leader; giving up", "option", opt)
		return end(NotLeader, 0, fmt.Errorf("not leader (%s): another candidate leads %s", opt, r.prefix()))
	case r.cfg.Campaign.NoWait && errors.Is(err, syscall.ECONNREFUSED):
		// Known at once (etcdconn.Unreached), not after the dial timeout.
		return end(Unreachable, 0, fmt.Errorf("etcd at %v not reached (--no-wait): %v", r.cfg.Endpoints, err))
	case r.cfg.Campaign.NoWait:
		return end(Unreachable, 0, fmt.Errorf("etcd at %v not reached within --dial-timeout %s (--no-wait): %v", r.cfg.Endpoints, r.cfg.Campaign.RequestTimeout, err))
	case errors.Is(err, campaign.ErrUnreachable), r.cfg.Wait > 0 && !time.Now().Before(r.waitUntil):
		return end(Unreachable, 0, fmt.Errorf("etcd at %v unreachable for --wait %s: %v", r.cfg.Endpoints, r.cfg.Wait, err))
	case errors.Is(err, errIneligible):
		r.resigned = true
		return nil
	case errors.Is(err, campaign.ErrResigned):
		r.log.Info("stepped down on request before leading; campaigning again")
		r.resigned = true
		return nil
	}
	r.lost = errors.Is(err, campaign.ErrKeyDeleted) || errors.Is(err, campaign.ErrKeyReplaced) || errors.Is(err, campaign.ErrLeaseLost)
	r.log.Warn("campaign failed", "error", err, "endpoints", r.cfg.Endpoints)
	return nil
}

// pausedEnd decides what a campaign that found the election paused does:
// under --no-wait or --once, end quietly with the conflict code, so that a
// cron line of a paused election says nothing; under --wait, end once the
// wait is over; else wait for the resume (nil: campaign again, which
// waits for it).
func (r *Runner) pausedEnd() *Outcome {
	switch {
	case r.cfg.Campaign.NoWait || r.cfg.Once:
		r.log.Debug("election paused; exiting")
		return end(NotLeader, 0, nil)
	case r.cfg.Wait > 0 && !time.Now().Before(r.waitUntil):
		return end(NotLeader, 0, fmt.Errorf("election %s paused for all of --wait %s", r.prefix(), r.cfg.Wait))
	}
	r.resigned = true
	return nil
}

// pause waits out a backoff; a stop signal or ctx ends it.
func (r *Runner) pause(ctx context.Context, d time.Duration) error {
	if r.waitUntil.IsZero() {
		r.log.Info("backing off", "delay", d)
	} else {
		// A backoff drawn late in --wait ends with it: the next campaign
		// then finds the wait over and says so.
		left := max(0, time.Until(r.waitUntil))
		d = min(d, left)
		r.log.Info("backing off", "delay", d, "wait_left", left)
	}
	r.mon.SetRole(ops.RoleBackingOff)
	return r.idle(ctx, d, nil)
}

// idle waits d, or until early is closed, answering signals; a stop
// signal or ctx ends it with errStopped.
func (r *Runner) idle(ctx context.Context, d time.Duration, early <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return nil
		case <-early:
			return nil
		case <-ctx.Done():
			return errStopped
		case s := <-r.sigs.C:
			if r.onSignal(s, signals.BackingOff, nil) == signals.Exit {
				return errStopped
			}
		}
	}
}

// startWait fixes when --wait ends, at the first attempt of a campaign.
func (r *Runner) startWait() {
	if r.cfg.Wait > 0 && r.waitUntil.IsZero() {
		r.waitUntil = time.Now().Add(r.cfg.Wait)
	}
}

type campaignResult struct {
	term Leadership
	err  error
}

// campaign runs one campaign while answering signals: a stop signal ends it
// and the campaign revokes its lease on the way out.
func (r *Runner) campaign(ctx context.Context) (Leadership, error) {
	cctx, cancel := r.campaignBound(ctx)
	defer cancel()
	r.log.Trace("campaign begins")
	if !r.cfg.Campaign.NoWait {
		// Warms up while etcd is asked; the first campaign's keeper is
		// under way already (runAction starts it first).
		r.keepers.Prepare()
	}
	res := make(chan campaignResult, 1)
	go func() {
		t, err := r.camp.Campaign(cctx)
		res <- campaignResult{t, err}
	}()
	// stop ends the campaign, and the term it may have won meanwhile.
	stop := func(err error) (Leadership, error) {
		cancel()
		if x := <-res; x.term != nil {
			abandon(x.term)
		}
		return nil, err
	}
	ineligible, stopChecks := r.watchEligible(cctx)
	defer stopChecks()
	for {
		select {
		case x := <-ineligible:
			r.log.Warn("no longer eligible (--eligible-cmd); leaving the queue", "check", x.Summary())
			return stop(errIneligible)
		case x := <-res:
			if x.term != nil && ctx.Err() != nil {
				abandon(x.term)
				return nil, errStopped
			}
			return x.term, x.err
		case <-ctx.Done():
			return stop(errStopped)
		case s := <-r.sigs.C:
			if r.onSignal(s, signals.Campaigning, nil) == signals.Exit {
				return stop(errStopped)
			}
		}
	}
}

// campaignBound bounds a campaign: by --wait's deadline, or, with
// --no-wait, by one attempt.
func (r *Runner) campaignBound(ctx context.Context) (context.Context, context.CancelFunc) {
	switch {
	case r.cfg.Wait > 0:
		r.startWait()
		return context.WithDeadline(ctx, r.waitUntil)
	case r.cfg.Campaign.NoWait:
		// One attempt: each request is bounded by --dial-timeout, and a
		// term that ended ahead without its record taken away is waited
		// out (campaign.EndedWaitLimit): it is no candidate to give up on,
		// and a cron line that gave up on it each time would never run.
		return context.WithTimeout(ctx, r.cfg.Campaign.RequestTimeout+campaign.EndedWaitLimit(r.cfg.Campaign.Timing.TTL, r.cfg.Campaign.Timing.FenceMargin))
	}
	return context.WithCancel(ctx)
}

// watchEligible runs --eligible-cmd while the candidate campaigns: one
// that stops being eligible leaves the queue. Without the check, the
// channel is nil. The returned func stops the check and waits for it.
func (r *Runner) watchEligible(ctx context.Context) (<-chan health.Result, func()) {
	if r.cfg.Eligible == nil {
		return nil, func() {}
	}
	ineligible := make(chan health.Result, 1)
	ectx, ecancel := context.WithCancel(ctx)
	var checks sync.WaitGroup
	checks.Go(func() { r.checkEligible(ectx, nil, ineligible) })
	return ineligible, func() {
		ecancel()
		checks.Wait()
	}
}

// onSignal applies what signals.Decide says a signal means in phase p, the
// one place where a caught signal acts; child is nil when none runs.
func (r *Runner) onSignal(s os.Signal, p signals.Phase, child Child) signals.Action {
	sig, _ := s.(syscall.Signal)
	name := signals.Name(sig)
	a := signals.Decide(p, s)
	switch a {
	case signals.Exit:
		r.log.Info("stop signal while "+p.String()+"; exiting", "signal", name)
		r.mon.SetRole(ops.RoleStopping)
	case signals.StopChild:
		child.Stop(sig)
		r.mon.SetRole(ops.RoleStopping)
		r.log.Info("child stopping", "signal", name, "kill_timeout", r.cfg.Campaign.Timing.KillTimeout)
	case signals.KillChild:
		child.Kill()
		r.log.Warn("second stop signal: killing the child's group", "signal", name)
	case signals.Forward:
		child.Signal(sig)
		r.log.Debug("forwarded signal", "signal", name)
	case signals.IgnoreStopped, signals.IgnoreNoChild:
		r.log.Info(a.Reason(), "signal", name)
	}
	return a
}

func (r *Runner) prefix() string { return r.cfg.Campaign.Layout.Prefix() }

// abandon ends a term won but not used: no command ran in it, so its
// record of the run id, if any, is taken back too.
func abandon(t Leadership) {
	t.ForgetRun()
	t.Revoke()
}
