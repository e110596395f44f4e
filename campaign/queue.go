package campaign

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// leasePoll is how often the front of the queue asks whether a predecessor's
// lease is gone yet. etcd offers no event for a lease's end once its key is
// gone, and only the first waiter asks, so the load stays constant.
const leasePoll = 250 * time.Millisecond

type pred struct {
	key   string
	rev   int64 // create revision
	lease clientv3.LeaseID
}

func predOf(kv *mvccpb.KeyValue) pred {
	return pred{key: string(kv.Key), rev: kv.CreateRevision, lease: clientv3.LeaseID(kv.Lease)}
}

// enqueue is step 2: put our key and read the queue in one transaction, so
// the predecessors it returns are exactly the keys created before ours.
func (t *Term) enqueue(ctx context.Context) ([]pred, int64, error) {
	cfg := t.c.cfg
	rctx, cancel := t.c.requestCtx(ctx)
	defer cancel()
	queue := clientv3.OpGet(cfg.Prefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	resp, err := cfg.Client.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(t.Key), "=", 0)).
		Then(clientv3.OpPut(t.Key, cfg.ID, clientv3.WithLease(t.Lease)), queue).
		// Else: an earlier attempt of this very transaction committed but
		// its answer was lost; the key is ours all the same.
		Else(queue).
		Commit()
	if err != nil {
		return nil, 0, fmt.Errorf("campaign transaction: %w", err)
	}
	rr := resp.Responses[len(resp.Responses)-1].GetResponseRange()
	var preds []pred
	for _, kv := range rr.Kvs {
		if string(kv.Key) == t.Key {
			t.Rev = kv.CreateRevision
			return preds, resp.Header.Revision, nil
		}
		preds = append(preds, predOf(kv))
	}
	return nil, 0, fmt.Errorf("campaign transaction: %w", ErrKeyDeleted)
}

// wait is steps 3-4: watch only the nearest predecessor, and before leading,
// make sure every predecessor's lease is gone. A predecessor whose key was
// re-put by its confirmation (mod > create revision) had passed its own
// barrier, which vouches for every key before it: then only its own lease
// needs checking, so a handoff costs the same whatever the queue length.
func (t *Term) wait(ctx context.Context, preds []pred, rev int64) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go t.renewWhileWaiting(ctx, cancel)

	unresolved := make(map[clientv3.LeaseID]pred, len(preds))
	place := make(map[string]int, len(preds))
	for i, p := range preds {
		unresolved[p.lease] = p
		place[p.key] = i
	}
	near := &preds[len(preds)-1]
	for near != nil {
		unresolved[near.lease] = *near
		t.c.log.Info("waiting on predecessor", "key", near.key, "rev", near.rev)
		vouched, err := t.waitDelete(ctx, *near, rev)
		if err != nil && ctx.Err() != nil {
			return t.waitErr(ctx)
		}
		gone := make(chan bool, 1)
		if err == nil {
			if vouched {
				for l, p := range unresolved {
					if p.rev < near.rev {
						delete(unresolved, l)
					}
				}
			}
			// Both are reads: ask about the lease and look again at once.
			go func(l clientv3.LeaseID) { ok, err := t.leaseGone(ctx, l); gone <- ok && err == nil }(near.lease)
		} else {
			gone <- false
		}
		gonePred := near.lease
		var lerr error
		near, rev, lerr = t.look(ctx)
		if <-gone {
			delete(unresolved, gonePred)
		}
		if lerr != nil {
			return t.waitErr(ctx, lerr)
		}
		// Every key ahead was in the transaction's answer, in order, so
		// the nearest one's place there says how many are still ahead.
		if near != nil && place[near.key] == 0 {
			t.front()
		}
	}
	if len(unresolved) == 0 {
		// The last look found our key and nobody ahead, after the last
		// predecessor's lease was seen gone: that look was the confirmation.
		t.watchRev = rev
		return nil
	}
	return t.barrier(ctx, unresolved)
}

// waitErr turns the end of waiting into the error callers act on.
func (t *Term) waitErr(ctx context.Context, errs ...error) error {
	if ctx.Err() == nil && len(errs) > 0 && errs[0] != nil {
		return errs[0] // permanent: retry gave up before ctx ended
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
		return cause
	}
	return fmt.Errorf("%w: %w", ErrNotLeader, ctx.Err())
}

// waitDelete blocks until p's key is deleted after rev. vouched says the key
// had been re-put by its owner's confirmation.
func (t *Term) waitDelete(ctx context.Context, p pred, rev int64) (vouched bool, err error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// Puts are watched too: the predecessor's confirmation re-puts its key
	// when it starts to lead, which makes this candidate the next one.
	wch := t.c.cfg.Client.Watch(wctx, p.key, clientv3.WithRev(rev+1), clientv3.WithPrevKV())
	for resp := range wch {
		if err := resp.Err(); err != nil {
			t.c.log.Debug("predecessor watch interrupted; looking again", "error", err)
			return false, err
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return ev.PrevKv != nil && ev.PrevKv.ModRevision > ev.PrevKv.CreateRevision, nil
			}
			if ev.Kv.ModRevision > ev.Kv.CreateRevision {
				t.front()
			}
		}
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	return false, errors.New("watch closed")
}

// look reads, in one read-only transaction, whether our key is still ours
// and which predecessor is nearest (the highest create revision below ours),
// retrying until ctx ends. It returns nil when none is left, and an error
// wrapping ErrKeyDeleted when our key is gone.
func (t *Term) look(ctx context.Context) (*pred, int64, error) {
	var p *pred
	var rev int64
	var mine bool
	err := retry(ctx, func() error {
		rctx, cancel := t.c.requestCtx(ctx)
		defer cancel()
		resp, err := t.c.cfg.Client.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(t.Key), "=", t.Rev)).
			Then(clientv3.OpGet(t.c.cfg.Prefix+"/", clientv3.WithPrefix(),
				clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(t.Rev-1), clientv3.WithLimit(1),
				clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend))).
			Commit()
		if err != nil {
			return err
		}
		rev, mine, p = resp.Header.Revision, resp.Succeeded, nil
		if mine {
			if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
				q := predOf(kvs[0])
				p = &q
			}
		}
		return nil
	})
	if err == nil && !mine {
		err = fmt.Errorf("while waiting: %w", ErrKeyDeleted)
	}
	return p, rev, err
}

// leaseGone asks etcd once (retrying errors) whether a lease is gone. Only
// TTL -1 means gone: the TTL is truncated to whole seconds, so a live lease
// with under a second left answers 0.
func (t *Term) leaseGone(ctx context.Context, id clientv3.LeaseID) (bool, error) {
	var gone bool
	err := retry(ctx, func() error {
		rctx, cancel := t.c.requestCtx(ctx)
		defer cancel()
		resp, err := t.c.cfg.Client.TimeToLive(rctx, id)
		if err != nil {
			return err
		}
		gone = resp.TTL == -1
		return nil
	})
	return gone, err
}

// barrier waits until every lease in unresolved is gone: a deleted key does
// not prove a stopped child; a gone lease does, because the holder's fence
// fires before etcd can expire it.
func (t *Term) barrier(ctx context.Context, unresolved map[clientv3.LeaseID]pred) error {
	for id, p := range unresolved {
		logged := false
		for {
			gone, err := t.leaseGone(ctx, id)
			if err != nil {
				return t.waitErr(ctx, err)
			}
			if gone {
				break
			}
			if !logged {
				if o := t.c.cfg.Observer; o != nil {
					o.BarrierWait()
				}
				t.c.log.Info("waiting for predecessor lease to end", "key", p.key, "lease", fmt.Sprintf("%x", int64(id)))
				logged = true
			}
			select {
			case <-ctx.Done():
				return t.waitErr(ctx)
			case <-time.After(leasePoll):
			}
		}
	}
	return nil
}

// confirm is step 5: the fence point must still be ahead, and, unless the
// last look already confirmed it, our key must still be the one we created.
// The re-put that marks the key as past its barrier for the candidate
// behind us (see wait) is not on this path: Hold makes it once the child
// runs.
func (t *Term) confirm(ctx context.Context) error {
	if t.c.cfg.Now()+t.c.cfg.Guard >= t.Deadline() {
		if err := t.renewOnce(ctx, t.c.cfg.RequestTimeout); err != nil {
			return err
		}
		if t.c.cfg.Now()+t.c.cfg.Guard >= t.Deadline() {
			return fmt.Errorf("confirm: fence point already passed: %w", ErrLeaseLost)
		}
	}
	t.vouch = true
	if t.watchRev != 0 {
		return nil
	}
	rctx, cancel := t.c.requestCtx(ctx)
	defer cancel()
	resp, err := t.c.cfg.Client.Get(rctx, t.Key)
	if err != nil {
		return fmt.Errorf("confirm: %w", err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != t.Rev {
		return fmt.Errorf("confirm: %w while waiting", ErrKeyDeleted)
	}
	t.watchRev = resp.Header.Revision
	return nil
}

// putVouch re-puts the key, unchanged, so that its mod revision passes its
// create revision: the mark that this term passed its barrier, which lets
// the candidate behind skip checking every lease before ours. Failing to
// put it is safe: the candidate behind then checks those leases itself.
func (t *Term) putVouch(ctx context.Context) {
	rctx, cancel := t.c.requestCtx(ctx)
	defer cancel()
	_, err := t.c.cfg.Client.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(t.Key), "=", t.Rev)).
		Then(clientv3.OpPut(t.Key, t.c.cfg.ID, clientv3.WithLease(t.Lease))).
		Commit()
	if err != nil && ctx.Err() == nil {
		t.c.log.Debug("could not mark the key as past its barrier", "error", err)
	}
}
