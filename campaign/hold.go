package campaign

import (
	"context"
	"errors"
	"time"
)

// Hold keeps the leadership (docs/design.md, "One term, step by step", step
// 8) until it is lost, a resign is requested (ErrResigned), or ctx ends. It
// renews every r = min(T/10, 1s), each attempt bounded by r, and calls
// onRenew with each new deadline before anything else, so that no log write
// can hold up the fence. The term's guard, running since the campaign
// transaction, ends it when its keys are deleted or taken over. It returns
// an error wrapping ErrKeyDeleted, ErrKeyReplaced, ErrLeaseLost or
// ErrResigned when leadership is lost, a permanent error when etcd refuses
// the guard's reads, or ctx.Err(). Renewal errors alone never end it: while
// etcd is unreachable the deadline stands still and the keeper's fence
// decides.
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
	tick := time.NewTicker(r)
	defer tick.Stop()
	for {
		err := t.renewOnce(ctx, r)
		switch {
		case err == nil:
			onRenew(t.Deadline())
			if failing {
				t.c.log.Info("renewal recovered")
				failing = false
			}
			t.c.log.Trace("renewed", "lease", leaseHex(t.Lease), "deadline_in", t.Deadline()-t.c.cfg.Now())
		case errors.Is(err, ErrLeaseLost):
			t.c.log.Warn("lease lost", "key", t.Key)
			return err
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
