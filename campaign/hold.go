package campaign

import (
	"context"
	"errors"
	"time"

	"github.com/etcdlead/etcdlead/internal/boottick"
)

// Hold keeps the leadership (docs/design.md, "One term, step by step", step
// 8) until it is lost, a resign is requested (ErrResigned), or ctx ends. It
// renews every r = min(T/10, 1s), each attempt bounded by r. The term's
// guard, running since the campaign transaction, ends it when its keys are
// deleted or taken over. It returns an error wrapping ErrKeyDeleted,
// ErrKeyReplaced, ErrLeaseLost or ErrResigned when leadership is lost, a
// permanent error when etcd refuses the guard's reads, or ctx.Err().
// Renewal errors alone never end it: while etcd is unreachable the deadline
// stands still and the keeper's fence decides.
//
// The first attempt is made at once only when the term's deadline puts the
// fence point less than 3r ahead; else r later, as every other.
//
// onRenew hands a deadline to the keeper. Hold calls it, before it logs
// anything about the attempt, with the term's Deadline after its first
// attempt and then, after any attempt, when the deadline has
// moved on from the last one handed over by at least a quarter of the
// outage tolerance T - (K+m) - r (K+m is Config.Guard), or when the last
// one handed over puts the fence point (deadline - K - m) less than 3r
// ahead (see tell). So every deadline handed over is one the term held,
// never later than etcd's expiry, and the keeper is woken a few times per
// outage tolerance rather than at every renewal. While etcd is unreachable
// the last deadline reaches the keeper before the old fence point, so the
// outage tolerance is the same as with every renewal handed over; only a
// supervisor that stops running altogether is fenced sooner, by less than
// a quarter of the outage tolerance.
//
// Hold renews in the caller's goroutine, so nothing it started runs after
// it returns: onRenew is never called once Hold has returned, and a caller
// that revokes next does not race a late renewal. A renewal under way when
// ctx ends is abandoned, not waited out, so that the revoke that follows a
// child's exit is not delayed by up to r.
func (t *Term) Hold(ctx context.Context, onRenew func(deadline time.Duration)) error {
	ctx, cancel := t.bound(ctx)
	defer cancel(nil)
	cancel(t.renewLoop(ctx, onRenew))
	return context.Cause(ctx)
}

// renewLoop renews until ctx ends (it returns ctx.Err()) or the lease is
// gone (ErrLeaseLost). Each attempt's request runs under ctx itself.
func (t *Term) renewLoop(ctx context.Context, onRenew func(time.Duration)) error {
	r := RenewInterval(t.TTL)
	failing := false
	var told time.Duration // the last deadline handed to onRenew; 0: none yet
	// On the boot clock, through the runtime's poller: an idle leader
	// wakes once per renewal (internal/boottick).
	tick := boottick.New(r)
	defer tick.Stop()
	if !renewAtOnce(t.Deadline(), t.c.cfg.Guard, t.c.cfg.Now(), r) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	for {
		err := t.renewOnce(ctx, r)
		if errors.Is(err, ErrLeaseLost) {
			t.c.log.Warn("lease lost", "key", t.Key)
			return err
		}
		if d := t.Deadline(); ctx.Err() == nil && t.tell(d, told, r) {
			onRenew(d)
			told = d
		}
		switch {
		case err == nil:
			if failing {
				t.c.log.Info("renewal recovered")
				failing = false
			}
			if t.c.log.IsTrace() { // its arguments cost allocations at every renewal
				t.c.log.Trace("renewed", "lease", leaseHex(t.Lease), "deadline_in", t.Deadline()-t.c.cfg.Now())
			}
		case ctx.Err() == nil && !failing:
			t.c.log.Warn("renewal failed", "error", err)
			failing = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// renewAtOnce is renewLoop's rule for its first attempt. A term starts
// with a deadline already, from its last renewal while waiting or from the
// grant, and the child's keeper has it. So the first renewal waits for the
// cadence unless that deadline d puts the fence point d - guard less than
// 3r ahead of now (tell's margin): renewing at once would add a request to
// every handoff, for a fence point that needs no moving yet.
func renewAtOnce(d, guard, now, r time.Duration) bool {
	return d-guard-now < 3*r
}

// tell is Hold's rule for handing deadline d to the keeper, which last got
// told (0: nothing yet from Hold).
//
// What it costs: the keeper's fence point is told - K - m, earlier than the
// term's own d - K - m by d - told. After each attempt, either d was handed
// over or d - told is under a quarter of the outage tolerance, and d moves
// only in attempts; so the keeper's deadline is never later than the
// term's, and less than that quarter earlier. Attempts end at most 2r apart
// (each is bounded by r and starts at the latest with the next tick, r
// after the last one ended), so a fence point less than 3r ahead is seen
// while at least r is left for the pipe and the keeper's wake-up: when the
// deadline stops moving (etcd unreachable), the last one still reaches the
// keeper in time, and the fence fires at d - K - m as it would with every
// renewal handed over. The quarter is lost only when the supervisor itself
// stops running.
func (t *Term) tell(d, told, r time.Duration) bool {
	if d <= told {
		return false
	}
	guard := t.c.cfg.Guard
	step := max(0, t.TTL-guard-r) / 4
	return told == 0 || d-told >= step || told-guard-t.c.cfg.Now() < 3*r
}
