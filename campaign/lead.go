package campaign

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/fence"
)

// Lead keeps the leadership (docs/design.md, "One term, step by step", step
// 8) until it is lost (ErrKeyDeleted, ErrKeyReplaced, ErrLeaseLost), a
// resign is requested (ErrResigned), etcd refuses the guard's reads (a
// permanent error) or ctx ends. It starts a renewal every r = min(T/10,
// 1s), without waiting for the one before: each attempt lives for as long
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
	t.endedEarly(err)
	cancel(err)
	return context.Cause(ctx)
}

// renewLoop renews until ctx ends (it returns ctx.Err()) or the lease is
// gone (ErrLeaseLost). Each attempt runs under a generation of ctx that
// ends when the fence point passes.
func (t *Term) renewLoop(ctx context.Context, onRenew func(time.Duration)) error {
	r := RenewInterval(t.TTL)
	failing := false // a failure or a stall was logged, and no recovery since
	// Attempts now wait for as long as they can help, so a stall would be
	// logged only at the fence point: one with no answer for 3r is logged
	// as it happens.
	answered := t.c.cfg.Now()
	var told time.Duration // the last deadline handed to onRenew; 0: none yet
	ctx, cancel := context.WithCancel(ctx)
	var attempts sync.WaitGroup
	defer attempts.Wait()
	defer cancel()
	// An attempt's result carries its number: one that failed after a
	// later attempt succeeded (it was sent on a quiet stream) is no
	// failure of the term's renewals.
	type result struct {
		n   int
		err error
	}
	results := make(chan result)
	started, succeeded := 0, 0
	// Attempts made while the fence point is ahead live until it passes
	// (ahead says some did): the tick that sees it passed ends them, as
	// their answers can no longer help, and starts a new generation.
	// Attempts made once it passed are bounded by r.
	gen, endGen := context.WithCancelCause(ctx)
	ahead := false
	// now is read once per tick and once per answer: the clock is read
	// from the kernel at every call, which at one renewal per second and
	// term adds up over many terms in a process.
	attempt := func(now time.Duration) {
		past := t.fence().Past(now)
		if past && ahead {
			endGen(errFencePassed)
			gen, endGen = context.WithCancelCause(ctx)
			ahead = false
		}
		bound := r
		if !past {
			bound, ahead = t.TTL, true
		}
		g := gen
		started++
		n := started
		attempts.Go(func() {
			err := t.renewOnce(g, bound)
			select {
			case results <- result{n, err}:
			case <-ctx.Done():
			}
		})
	}
	// On the boot clock: a renewal due during a suspend is made at the
	// resume (internal/bootclock).
	tick := bootclock.NewTicker(r)
	defer tick.Stop()
	if now := t.c.cfg.Now(); renewAtOnce(t.fence(), now, r) {
		attempt(now)
	}
	for {
		var now time.Duration
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			now = t.c.cfg.Now()
			attempt(now)
			if since := now - answered; !failing && since >= 3*r {
				t.c.log.Warn("renewal unanswered", "for", since.Round(time.Millisecond))
				failing = true
			}
		case res := <-results:
			now = t.c.cfg.Now()
			switch err := res.err; {
			case errors.Is(err, ErrLeaseLost):
				t.c.log.Warn("lease lost", "key", t.Key)
				return err
			case err == nil:
				succeeded = max(succeeded, res.n)
				answered = now
				if failing {
					t.c.log.Info("renewal recovered")
					failing = false
				}
				if t.c.log.IsTrace() { // its arguments cost allocations at every renewal
					t.c.log.Trace("renewed", "lease", leaseHex(t.Lease), "deadline_in", t.Deadline()-now)
				}
			case ctx.Err() == nil && !failing && res.n > succeeded:
				t.c.log.Warn("renewal failed", "error", err)
				failing = true
			}
		}
		if d := t.Deadline(); ctx.Err() == nil && t.keeperNeeds(d, told, r, now) {
			onRenew(d)
			told = d
		}
	}
}

// errFencePassed ends the renewal attempts whose answers came too late to
// move the fence.
var errFencePassed = errors.New("no answer before the fence point")

// renewAtOnce is renewLoop's rule for its first attempt. A term starts
// with a deadline already, from its last renewal while waiting or from the
// grant, and the child's keeper has it. So the first renewal waits for the
// cadence unless that fence's point is less than 3r ahead of now (keeperNeeds'
// margin): renewing at once would add a request to every handoff, for a
// fence point that needs no moving yet.
func renewAtOnce(f fence.Fence, now, r time.Duration) bool {
	return f.SignalAt()-now < 3*r
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
