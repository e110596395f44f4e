package campaign

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Hold keeps the leadership (DESIGN.md steps 6-7) until it is lost, a resign
// is requested (ErrResigned), or ctx ends. It renews every r = min(T/10, 1s), each attempt bounded by r, and
// calls onRenew with each new deadline; it watches the key for deletion and
// re-reads it every T/3 in case the watch stalled silently. It returns an
// error wrapping ErrKeyDeleted or ErrLeaseLost when leadership is lost, or
// ctx.Err(). Renewal errors alone never end it: while etcd is unreachable the
// deadline stands still and the keeper's fence decides.
func (t *Term) Hold(ctx context.Context, onRenew func(deadline time.Duration)) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if t.vouch {
		go t.putVouch(ctx)
	}
	go func() { cancel(t.renewLoop(ctx, onRenew)) }()
	go func() { cancel(t.watchKey(ctx)) }()
	go func() { cancel(t.rereadLoop(ctx)) }()
	if t.c.cfg.ResignKey != "" {
		go func() { cancel(t.watchResign(ctx)) }()
	}
	<-ctx.Done()
	return context.Cause(ctx)
}

func (t *Term) renewLoop(ctx context.Context, onRenew func(time.Duration)) error {
	r := RenewInterval(t.TTL)
	failing := false
	tick := time.NewTicker(r)
	defer tick.Stop()
	for {
		err := t.renewOnce(ctx, r)
		switch {
		case errors.Is(err, ErrLeaseLost):
			t.c.log.Warn("lease lost", "key", t.Key)
			return err
		case err != nil && ctx.Err() == nil && !failing:
			t.c.log.Warn("renewal failed", "error", err)
			failing = true
		case err == nil:
			if failing {
				t.c.log.Info("renewal recovered")
				failing = false
			}
			t.c.log.Trace("renewed", "lease", fmt.Sprintf("%x", int64(t.Lease)), "deadline_in", t.Deadline()-t.c.cfg.Now())
			onRenew(t.Deadline())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// watchKey ends the term when the key is deleted. Progress notifications
// keep the revision fresh; a compacted revision is not a loss if the key
// still has our create revision.
func (t *Term) watchKey(ctx context.Context) error {
	rev := t.watchRev
	for {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := t.c.cfg.Client.Watch(wctx, t.Key, clientv3.WithRev(rev+1),
			clientv3.WithFilterPut(), clientv3.WithProgressNotify())
		for resp := range wch {
			if err := resp.Err(); err != nil {
				t.c.log.Debug("own-key watch interrupted; re-reading the key", "error", err)
				break
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					cancel()
					t.c.log.Warn("key deleted", "key", t.Key, "rev", ev.Kv.ModRevision)
					return ErrKeyDeleted
				}
			}
			rev = max(rev, resp.Header.Revision)
		}
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Compaction, a lost etcd leader or a broken stream: look at the key
		// itself, then watch on from what we saw.
		var err error
		if rev, err = t.check(ctx); err != nil {
			return err
		}
	}
}

func (t *Term) rereadLoop(ctx context.Context) error {
	every := t.TTL / 3
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
		if _, err := t.check(ctx); errors.Is(err, ErrKeyDeleted) {
			return err
		}
	}
}

// check reads the key: gone, or with another create revision, means lost.
// It retries transient errors until ctx ends.
func (t *Term) check(ctx context.Context) (int64, error) {
	var rev int64
	var lost bool
	err := retry(ctx, func() error {
		rctx, cancel := t.c.requestCtx(ctx)
		defer cancel()
		resp, err := t.c.cfg.Client.Get(rctx, t.Key)
		if err != nil {
			return err
		}
		rev = resp.Header.Revision
		lost = len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != t.Rev
		return nil
	})
	if err != nil {
		return 0, err
	}
	if lost {
		t.c.log.Warn("key deleted", "key", t.Key)
		return 0, fmt.Errorf("re-read: %w", ErrKeyDeleted)
	}
	return rev, nil
}

// watchResign ends the term when `etcdlead resign` names this term's key in
// the resign-request key. The request names a key, not an id, so a request
// meant for an earlier leader can never make a later one step down.
func (t *Term) watchResign(ctx context.Context) error {
	rev := t.watchRev
	for {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := t.c.cfg.Client.Watch(wctx, t.c.cfg.ResignKey, clientv3.WithRev(rev+1), clientv3.WithFilterDelete())
		for resp := range wch {
			if err := resp.Err(); err != nil {
				break
			}
			for _, ev := range resp.Events {
				if string(ev.Kv.Value) == t.Key {
					cancel()
					t.c.log.Info("resign requested", "key", t.Key)
					return ErrResigned
				}
			}
			rev = max(rev, resp.Header.Revision)
		}
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Compacted or interrupted: a request put meanwhile is still the
		// key's current value.
		var requested bool
		err := retry(ctx, func() error {
			rctx, rcancel := t.c.requestCtx(ctx)
			defer rcancel()
			resp, err := t.c.cfg.Client.Get(rctx, t.c.cfg.ResignKey)
			if err != nil {
				return err
			}
			requested = len(resp.Kvs) > 0 && string(resp.Kvs[0].Value) == t.Key
			rev = resp.Header.Revision
			return nil
		})
		if err != nil {
			return ctx.Err()
		}
		if requested {
			t.c.log.Info("resign requested", "key", t.Key)
			return ErrResigned
		}
	}
}
