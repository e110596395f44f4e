package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/etcdlead/etcdlead/internal/health"
	"github.com/etcdlead/etcdlead/internal/ops"
	"github.com/etcdlead/etcdlead/signals"
)

// Check is a check run every Interval (--eligible-cmd).
type Check struct {
	Probe    health.Probe
	Interval time.Duration
}

// HealthCheck is the command's health check (--health-cmd, --health-url),
// with Docker's rules for its verdict (health.Tracker).
type HealthCheck struct {
	Check
	Retries     int
	StartPeriod time.Duration
	// Restart: an unhealthy command is restarted in place
	// (--health-action=restart) instead of stepping down.
	Restart bool
}

var (
	// errUnhealthy ends a term whose command's health check failed, for
	// a candidate that waits.
	errUnhealthy = errors.New("the command is unhealthy")
	// errIneligible ends a term, or a campaign, once --eligible-cmd fails.
	errIneligible = errors.New("not eligible (--eligible-cmd)")
)

// How the health check's failures are damped (docs/design.md, "Health and
// eligibility"): a command restarted in place waits restartDelay, doubling
// up to restartMax; a candidate that stepped down sits out sickDelay,
// doubling up to sickMax, unless the election has no candidate; both start
// afresh after healthQuiet without an unhealthy verdict.
const (
	restartMax  = 5 * time.Minute
	sickMax     = time.Hour
	healthQuiet = time.Hour
)

func newDamping(initial, ceiling time.Duration) *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = max(initial, time.Second)
	b.MaxInterval = ceiling
	b.MaxElapsedTime = 0
	// A little jitter, so that candidates sick together do not come back
	// together.
	b.RandomizationFactor = 0.2
	b.Reset()
	return b
}

// verdict is what the health check decided, for the term's loop.
type verdict struct {
	res health.Result
	// command counts the commands of the term: a verdict about one that
	// was restarted since is stale.
	command int
	// stepDown: a candidate waits to take over; else the command is
	// restarted in place.
	stepDown bool
}

// termChecks are the checks that run during one term: eligibility for the
// whole term, health for each command. stop ends them and returns once
// every process they started is gone, before the term may be revoked.
type termChecks struct {
	r        *Runner
	term     Leadership
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	eligible chan health.Result
	verdicts chan verdict
	// health ends the current command's health loop, and command counts
	// the commands checked (verdict.command).
	health  context.CancelFunc
	command int
}

func (r *Runner) startTermChecks(ctx context.Context, term Leadership) *termChecks {
	c := &termChecks{r: r, term: term, eligible: make(chan health.Result, 1), verdicts: make(chan verdict, 1)}
	c.ctx, c.cancel = context.WithCancel(ctx)
	if r.cfg.Eligible != nil {
		c.wg.Go(func() { r.checkEligible(c.ctx, term.Deadline, c.eligible) })
	}
	c.startHealth()
	return c
}

// startHealth checks the command just started, with a fresh verdict.
func (c *termChecks) startHealth() {
	h := c.r.cfg.Health
	if h == nil {
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.health = cancel
	c.command++
	command := c.command
	tracker := health.NewTracker(h.Retries, h.StartPeriod, time.Now())
	c.r.noteHealth(tracker)
	c.wg.Go(func() {
		health.Loop(ctx, h.Probe, h.Interval, c.term.Deadline, func(res health.Result) {
			before := tracker.Status()
			if after := tracker.Observe(res); after != before {
				c.r.log.Info("the command is "+after.String(), "check", res.Summary())
				c.recordHealth(ctx, after)
			} else if !res.OK {
				c.r.log.Debug("health check failed", "check", res.Summary(), "failing", tracker.Failing())
			}
			c.r.noteHealth(tracker)
			if tracker.Status() != health.Unhealthy {
				return
			}
			v := verdict{res: res, command: command}
			if !h.Restart {
				// Stepping down helps only if a candidate takes over:
				// with none waiting (every other one sick, say), the
				// command is restarted in place instead.
				waiting, err := c.term.Waiting(ctx)
				v.stepDown = err == nil && waiting
			}
			send(ctx, c.verdicts, v)
		})
	})
}

// recordHealth writes a changed verdict to etcd for etcdlead status. A
// write that fails costs only the record: the verdict acts all the same.
func (c *termChecks) recordHealth(ctx context.Context, s health.Status) {
	if err := c.term.RecordHealth(ctx, s.String()); err != nil && ctx.Err() == nil {
		c.r.log.Warn("the command's health not recorded in etcd for etcdlead status", "error", err)
	}
}

// current reports whether v is about the command that runs now.
func (c *termChecks) current(v verdict) bool { return v.command == c.command }

// stopHealth ends the health loop of the command being replaced.
func (c *termChecks) stopHealth() {
	if c.health != nil {
		c.health()
	}
}

func (c *termChecks) stop() {
	c.cancel()
	c.wg.Wait()
}

func send[T any](ctx context.Context, ch chan<- T, v T) {
	select {
	case ch <- v:
	case <-ctx.Done():
	}
}

func (r *Runner) noteHealth(t *health.Tracker) {
	c := ops.Check{Status: t.Status().String(), Failing: t.Failing()}
	last, seen := t.Last()
	if seen {
		c.Last, c.Output, c.At = last.Summary(), last.Output, last.At
	}
	r.mon.Checked(ops.CheckHealth, c, !seen || last.OK)
}

// checkEligible runs --eligible-cmd every interval until ctx ends, noting
// each result and handing each failure to failed; deadline is the fence of
// its processes (nil: none).
func (r *Runner) checkEligible(ctx context.Context, deadline func() time.Duration, failed chan<- health.Result) {
	e := r.cfg.Eligible
	health.Loop(ctx, e.Probe, e.Interval, deadline, func(res health.Result) {
		r.noteEligible(res)
		if !res.OK {
			send(ctx, failed, res)
		}
	})
}

func (r *Runner) noteEligible(res health.Result) {
	status := "ineligible"
	if res.OK {
		status = "eligible"
	}
	r.mon.Checked(ops.CheckEligible, ops.Check{Status: status, Last: res.Summary(), Output: res.Output, At: res.At}, res.OK)
}

// checkOnce runs one eligibility check while answering signals: a stop
// signal ends the check, every process of it gone, and gives errStopped.
func (r *Runner) checkOnce(ctx context.Context, p health.Probe) (health.Result, error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan health.Result, 1)
	go func() { done <- p.Check(cctx, nil) }()
	for {
		select {
		case res := <-done:
			if ctx.Err() != nil {
				return res, errStopped
			}
			return res, nil
		case s := <-r.sigs.C:
			if r.onSignal(s, signals.BackingOff, nil) == signals.Exit {
				cancel()
				<-done
				return health.Result{}, errStopped
			}
		}
	}
}

// awaitEligible returns once --eligible-cmd passes, checking every
// interval: a candidate that is not eligible does not queue. Under
// --no-wait or --once it ends the run at once instead, quietly, with the
// conflict code; under --wait, once the wait is over.
func (r *Runner) awaitEligible(ctx context.Context) *Outcome {
	e := r.cfg.Eligible
	if e == nil {
		return nil
	}
	r.startWait()
	logged := false
	for {
		res, err := r.checkOnce(ctx, e.Probe)
		if err != nil {
			return end(Stopped, 0, nil)
		}
		r.noteEligible(res)
		if res.OK {
			if logged {
				r.log.Info("eligible again; campaigning", "check", res.Summary())
			}
			return nil
		}
		switch {
		case r.cfg.Campaign.NoWait || r.cfg.Once:
			r.log.Info("not eligible (--eligible-cmd); exiting", "check", res.Summary())
			return end(NotLeader, 0, nil)
		case r.cfg.Wait > 0 && !time.Now().Before(r.waitUntil):
			return end(NotLeader, 0, fmt.Errorf("not eligible (--eligible-cmd) for all of --wait %s: %s", r.cfg.Wait, res.Summary()))
		}
		if !logged {
			r.log.Warn("not eligible (--eligible-cmd); not campaigning, checking again", "check", res.Summary(), "every", e.Interval)
			logged = true
		}
		r.mon.SetRole(ops.RoleIneligible)
		if err := r.idleReachable(ctx, e.Interval, nil); err != nil {
			return end(Stopped, 0, nil)
		}
	}
}

// sitOutSick waits after a step-down for the command's health before the
// candidate queues again, damped (sickDelay), but returns at once when the
// election has no candidate: a sick leader is better than none.
func (r *Runner) sitOutSick(ctx context.Context) error {
	d := r.sick.NextBackOff()
	r.log.Warn("stepped down: the command was unhealthy; campaigning again after a pause, or at once if the election has no candidate", "in", d)
	r.mon.SetRole(ops.RoleBackingOff)
	vctx, cancel := context.WithCancel(ctx)
	defer cancel()
	vacant := make(chan struct{})
	go func() {
		if r.camp.AwaitVacant(vctx) == nil {
			close(vacant)
		}
	}()
	return r.idleReachable(ctx, d, vacant)
}

// idleReachable is idle for a candidate that holds no lease: it asks etcd
// at once and every TTL/2 whether it answers, so that its health (etcd
// answered within a TTL) stays true while etcd does, and systemd hears
// READY=1 and its watchdog's pings.
func (r *Runner) idleReachable(ctx context.Context, d time.Duration, early <-chan struct{}) error {
	pctx, cancel := context.WithCancel(ctx)
	var pinging sync.WaitGroup
	defer func() {
		cancel()
		pinging.Wait()
	}()
	pinging.Go(func() {
		every := max(r.cfg.Campaign.Timing.TTL/2, time.Second)
		for {
			if r.camp.Ping(pctx) == nil {
				r.mon.Reached()
			}
			select {
			case <-pctx.Done():
				return
			case <-time.After(every):
			}
		}
	})
	return r.idle(ctx, d, early)
}

// dampingAfterQuiet starts the damping afresh once healthQuiet has passed
// since the last unhealthy verdict, and notes this one.
func (r *Runner) dampingAfterQuiet() {
	if !r.lastUnhealthy.IsZero() && time.Since(r.lastUnhealthy) > healthQuiet {
		r.sick.Reset()
		r.restarts.Reset()
	}
	r.lastUnhealthy = time.Now()
}
