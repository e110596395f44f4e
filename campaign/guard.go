package campaign

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/trace"
)

// guard ends the term, from its creation on, waiting or leading, when its
// queue key or sentinel is deleted or put under another lease, or when a
// resign request names it. A waiter that lost its keys would otherwise go
// on renewing a lease that blocks every newer term, and a resign aimed at a
// candidate still in its barrier would be lost. It watches the three keys,
// and re-reads them every rereadEvery(T) in case a watch stalls silently.
// Its goroutines end with the term's context; Revoke waits for them. Its
// watches are on a stream of the term's own, which Revoke closes.
func (t *Term) guard(from int64) {
	t.watches = clientv3.NewWatcher(t.c.cfg.Client)
	t.guards.Go(func() { t.lose(t.watchOwn(from)) })
	t.guards.Go(func() { t.lose(t.rereadLoop()) })
}

func (t *Term) watchOwn(rev int64) error {
	keys := []string{t.Key, t.Sentinel, t.c.cfg.Layout.ResignKey()}
	for {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(t.ctx))
		err := t.follow(wctx, keys, rev)
		cancel()
		if err != nil {
			return err
		}
		if t.ctx.Err() != nil {
			return t.ctx.Err()
		}
		// Compaction, a lost etcd leader or a broken stream: look at the
		// keys themselves, then watch on from what we saw.
		if rev, err = t.check(t.ctx); err != nil {
			return err
		}
		t.c.log.Debug("own keys intact; watching them again", "rev", rev)
	}
}

// follow watches keys from rev+1 until one of them ends the term (the
// error) or a watch is interrupted (nil).
func (t *Term) follow(ctx context.Context, keys []string, rev int64) error {
	ws, stop := t.guardWatch(ctx, keys, rev, clientv3.WithProgressNotify())
	defer stop()
	for {
		var w watched
		select {
		case w = <-ws:
		case <-ctx.Done():
			return nil
		}
		if !w.ok {
			return nil
		}
		if err := w.resp.Err(); err != nil {
			if Permanent(err) {
				return fmt.Errorf("watch %s: %w", keys[w.i], err)
			}
			t.c.log.Debug("own-key watch interrupted; re-reading the key", "error", err)
			return nil
		}
		for _, ev := range w.resp.Events {
			if err := t.event(ev); err != nil {
				return err
			}
		}
	}
}

// event decides whether one change to the term's keys ends it.
func (t *Term) event(ev *clientv3.Event) error {
	key := string(ev.Kv.Key)
	if key == t.c.cfg.Layout.ResignKey() {
		if ev.Type == clientv3.EventTypePut && string(ev.Kv.Value) == t.Key {
			t.c.log.Info("resign requested", "key", t.Key)
			return ErrResigned
		}
		return nil
	}
	switch {
	case ev.Type == clientv3.EventTypeDelete:
		trace.Mark("campaign.key-deleted")
		t.c.log.Warn("key deleted", "key", key, "rev", ev.Kv.ModRevision)
		return ErrKeyDeleted
	case clientv3.LeaseID(ev.Kv.Lease) != t.Lease || ev.Kv.CreateRevision != t.Rev:
		t.c.log.Warn("key replaced", "key", key, "lease", leaseHex(clientv3.LeaseID(ev.Kv.Lease)), "rev", ev.Kv.ModRevision)
		return ErrKeyReplaced
	}
	return nil
}

// rereadFloor is the shortest pause between two of the guard's re-reads:
// T/3 at the default TTL.
const rereadFloor = 5 * time.Second

// rereadEvery is the pace of the guard's re-read, T/3 but no less than
// rereadFloor. The re-read only backs up a watch that stalls while its
// stream lives (a broken or compacted watch is re-read at once, watchOwn),
// so it bounds how late such a stall lets a deleted key or a resign
// request be noticed, never what runs: a successor still waits for this
// term's lease itself (docs/design.md, step 4). A read is a request of its
// own, far dearer than a renewal on the open stream: tied to T alone, a
// short TTL would pay for one every few renewals, for a double fault (a
// silent stall, then a delete or a resign) that it makes no likelier.
func rereadEvery(ttl time.Duration) time.Duration { return max(ttl/3, rereadFloor) }

func (t *Term) rereadLoop() error {
	every := rereadEvery(t.TTL)
	for {
		select {
		case <-t.ctx.Done():
			return t.ctx.Err()
		case <-time.After(every):
		}
		if _, err := t.check(t.ctx); err != nil && t.ctx.Err() == nil {
			return err
		}
	}
}

// check reads the term's keys and the resign request in one read-only
// transaction, retrying transient errors until the term ends. It returns
// the read's revision, or why the term is lost.
func (t *Term) check(ctx context.Context) (int64, error) {
	var resp *clientv3.TxnResponse
	err := retry(ctx, func() error {
		return t.c.request(ctx, t.c.cfg.RequestTimeout, func(rctx context.Context) (err error) {
			resp, err = t.c.cfg.Client.Txn(rctx).Then(clientv3.OpGet(t.Key), clientv3.OpGet(t.Sentinel),
				clientv3.OpGet(t.c.cfg.Layout.ResignKey())).Commit()
			return err
		})
	})
	if err != nil {
		if Permanent(err) {
			return 0, err
		}
		return 0, ctx.Err()
	}
	for i, key := range []string{t.Key, t.Sentinel} {
		kvs := resp.Responses[i].GetResponseRange().Kvs
		if len(kvs) == 0 {
			t.c.log.Warn("key deleted", "key", key)
			return 0, fmt.Errorf("re-read: %w", ErrKeyDeleted)
		}
		if clientv3.LeaseID(kvs[0].Lease) != t.Lease || kvs[0].CreateRevision != t.Rev {
			t.c.log.Warn("key replaced", "key", key)
			return 0, fmt.Errorf("re-read: %w", ErrKeyReplaced)
		}
	}
	if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) > 0 && string(kvs[0].Value) == t.Key {
		t.c.log.Info("resign requested", "key", t.Key)
		return 0, fmt.Errorf("re-read: %w", ErrResigned)
	}
	return resp.Header.Revision, nil
}
