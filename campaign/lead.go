package campaign

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/etcdlead/etcdlead/internal/bootclock"
)

// Lead keeps the leadership (docs/design.md, "One term, step by step", step
// 8) until it is lost (ErrKeyDeleted, ErrKeyReplaced, ErrLeaseLost), a
// resign is requested (ErrResigned), etcd refuses the guard's reads (a
// permanent error) or ctx ends. It starts a renewal every r (the renewal
// interval, min(T/10, 1s) unless one is given), counted from the term's
// last credited send (firstRenewal), without waiting for the one before,
// and, when r is longer than quietAfter, again after quietAfter while the
// attempt is unanswered, so that a leader that renews seldom still moves
// off a stalled member at once (internal/etcdwire/renew.go, "A quiet stream"): each attempt lives for as long
// as its answer can still help, until the fence point of the deadline (as
// it moves) passes, so that a round trip longer than r still renews the
// lease, and attempts overlap. Renewal errors alone never end
// it: while etcd is unreachable the deadline stands still and the fence
// decides.
//
// onRenew hands a deadline the term held to the keeper, when keeperNeeds says the
// keeper should hear it. It runs in the caller's goroutine and is never
// called once Lead has returned, so a revoke that follows does not race a
// renewal; no attempt outlives Lead either.
func (t *Term) Lead(ctx context.Context, onRenew func(deadline time.Duration)) error {
	ctx, cancel := t.bound(ctx)
	defer cancel(nil)
	err := t.renewLoop(ctx, onRenew)
	cancel(err)
	return context.Cause(ctx)
}

// renewLoop renews until ctx ends (it returns ctx.Err()) or the lease is
// gone (ErrLeaseLost). Each attempt runs under a generation of ctx that
// ends when the fence point passes.
func (t *Term) renewLoop(ctx context.Context, onRenew func(time.Duration)) error {
	// Attempts now wait for as long as they can help, so a stall would be
	// logged only at the fence point: one with no answer for r + 2q (3r at
	// the default interval) is logged as it happens (tick).
	answered := t.c.cfg.Now()
	ctx, cancel := context.WithCancel(ctx)
	rn := &renewer{t: t, ctx: ctx, r: t.c.renewEvery(), q: quietAfter(t.TTL), onRenew: onRenew,
		results: make(chan renewResult), answered: answered}
	defer rn.attempts.Wait()
	defer cancel()
	rn.gen, rn.endGen = context.WithCancelCause(ctx)
	// On the client's shared beat, a boot-clock ticker: a renewal due
	// during a suspend is made at the resume (internal/bootclock).
	rn.now = t.c.cfg.Now()
	tick, next, unsubscribe := t.c.renewals.Beat(rn.r, t.c.cfg.Now).Subscribe()
	defer unsubscribe()
	early, stopEarly := rn.first(next)
	defer stopEarly()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-early:
			early = nil
			stopEarly()
			rn.tick()
		case <-tick:
			rn.tick()
		case <-rn.retry:
			rn.retry = nil
			if rn.succeeded < rn.started {
				rn.tick()
			}
		case res := <-rn.results:
			if err := rn.answer(res); err != nil {
				return err
			}
		}
		rn.handOver()
	}
}

// renewer is one leader's renewals (renewLoop), with a method per event.
type renewer struct {
	t       *Term
	ctx     context.Context
	r, q    time.Duration // the renewal interval and quietAfter
	onRenew func(time.Duration)

	attempts sync.WaitGroup
	// An attempt's result carries its number: one that failed after a
	// later attempt succeeded (it was sent on a quiet stream) is no
	// failure of the term's renewals.
	results            chan renewResult
	started, succeeded int
	// Attempts made while the fence point is ahead live until it passes
	// (ahead says some did): the tick that sees it passed ends them, as
	// their answers can no longer help, and starts a new generation.
	// Attempts made once it passed are bounded by r.
	gen    context.Context
	endGen context.CancelCauseFunc
	ahead  bool

	// now is read once per tick and once per answer: the clock is read
	// from the kernel at every call, which at one renewal per second and
	// term adds up over many terms in a process.
	now      time.Duration
	answered time.Duration // when an attempt last succeeded
	failing  bool          // a failure or a stall was logged, and no recovery since
	told     time.Duration // the last deadline handed to onRenew; 0: none yet
	// retry fires q after an attempt when r is longer than q: the attempt
	// still unanswered then is sent again, which a quiet stream takes to
	// another member. With r = q the next tick does that.
	retry <-chan time.Time
}

type renewResult struct {
	n   int
	err error
}

// first makes the first attempt as firstRenewal asks: on the beat when its
// next tick comes no later; otherwise on a timer of its own (at once, if
// it is due), which the returned channel fires. The tick then follows it
// within r, as every tick follows the one before.
func (rn *renewer) first(next time.Duration) (<-chan time.Time, func()) {
	switch first := rn.t.firstRenewal(rn.now, rn.r); {
	case next <= first:
	case first <= rn.now:
		rn.attempt(rn.now)
	default:
		t1 := bootclock.NewTicker(first - rn.now)
		return t1.C, t1.Stop
	}
	return nil, func() {}
}

// tick makes an attempt, arms the retry, and logs a stall once.
func (rn *renewer) tick() {
	rn.now = rn.t.c.cfg.Now()
	rn.attempt(rn.now)
	if rn.r > rn.q {
		rn.retry = time.After(rn.q)
	}
	if since := rn.now - rn.answered; !rn.failing && since >= rn.r+2*rn.q {
		rn.t.c.log.Warn("renewal unanswered", "for", since.Round(time.Millisecond))
		rn.failing = true
	}
}

// attempt starts one renewal at boot-clock time now, in the current
// generation; the first one made once the fence point passed ends the
// generation of those made before.
func (rn *renewer) attempt(now time.Duration) {
	past := rn.t.fence().Past(now)
	if past && rn.ahead {
		rn.endGen(errFencePassed)
		rn.gen, rn.endGen = context.WithCancelCause(rn.ctx)
		rn.ahead = false
	}
	bound := rn.r
	if !past {
		bound, rn.ahead = rn.t.TTL, true
	}
	g := rn.gen
	rn.started++
	n := rn.started
	rn.attempts.Go(func() {
		err := rn.t.renewOnce(g, bound)
		select {
		case rn.results <- renewResult{n, err}:
		case <-rn.ctx.Done():
		}
	})
}

// answer takes an attempt's result: a lease that is gone ends the loop.
func (rn *renewer) answer(res renewResult) error {
	t := rn.t
	rn.now = t.c.cfg.Now()
	switch err := res.err; {
	case errors.Is(err, ErrLeaseLost):
		t.c.log.Warn("lease lost", "key", t.Key)
		return err
	case err == nil:
		rn.succeeded = max(rn.succeeded, res.n)
		rn.answered = rn.now
		if rn.failing {
			t.c.log.Info("renewal recovered")
			rn.failing = false
		}
		if t.c.log.IsTrace() { // its arguments cost allocations at every renewal
			t.c.log.Trace("renewed", "lease", leaseHex(t.Lease), "deadline_in", t.Deadline()-rn.now)
		}
	case rn.ctx.Err() == nil && !rn.failing && res.n > rn.succeeded:
		t.c.log.Warn("renewal failed", "error", err)
		rn.failing = true
	}
	return nil
}

// handOver gives the keeper the term's deadline when keeperNeeds says so.
func (rn *renewer) handOver() {
	if d := rn.t.Deadline(); rn.ctx.Err() == nil && rn.t.keeperNeeds(d, rn.told, rn.r, rn.now) {
		rn.onRenew(d)
		rn.told = d
	}
}

// errFencePassed ends the renewal attempts whose answers came too late to
// move the fence.
var errFencePassed = errors.New("no answer before the fence point")

// firstRenewal is when renewLoop makes its first attempt, at boot-clock
// time now: r after the term's last credited send (its grant, or its last
// renewal while waiting), or at once (now) when that is past. Each later
// attempt follows the one before by r, so the room for a round trip is the
// outage tolerance T - (K+m) - r: the deadline counts from the last
// credited send, and an answer to the send r later lands before the fence
// point if its round trip fits. Counted from Lead's start, the first
// attempt would lose from that room the time between the last credited
// send and Lead (the confirmation, the child's start), just as the term
// begins.
//
// It renews at once whenever the rule it replaced did, when the fence
// point is less than 3r ahead (keeperNeeds' margin): etcd answers every
// renewal with the lease's TTL T, so the fence point is lastSent + T -
// (K+m); ResolveTiming's rule K + m + r <= 2T/3 puts it at least lastSent
// + T/3 + r, and the default r <= T/10 puts that at least 3r past
// lastSent + r. (With a longer r given by hand, or K and m that break the
// rule, which Config does not check, a first attempt may wait up to
// lastSent + r with the fence point nearer: no longer than every later
// attempt waits.) A new leader renews at once, then,
// only when its last renewal as a waiter is more than r old: the request
// this adds to such a handoff is what keeps the term's room for a round
// trip from its start.
func (t *Term) firstRenewal(now, r time.Duration) time.Duration {
	return max(now, t.lastSent()+r)
}

// keeperNeeds is Lead's rule for handing deadline d to the keeper, which last got
// told (0: nothing yet), at boot-clock time now: when d moved on by a quarter of the outage
// tolerance T - (K+m) - r, or when told puts the fence point less than 3r
// ahead. The rule is asked at every tick and every answer, at most r apart,
// so while etcd is unreachable the last deadline still reaches the keeper
// in time and the fence fires when it would with every renewal handed
// over; the keeper is woken a few times per outage tolerance instead of at
// every renewal.
func (t *Term) keeperNeeds(d, told, r, now time.Duration) bool {
	if d <= told {
		return false
	}
	f := t.fenceAt(told)
	step := max(0, t.TTL-f.KillTimeout-f.Margin-r) / 4
	return told == 0 || d-told >= step || f.SignalAt()-now < 3*r
}
