package campaign

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/etcdwire"
)

// guard ends the term, from its creation on, waiting or leading, when its
// queue key or sentinel is deleted or put under another lease, when its
// record is deleted, created anew or rewritten with a value the term did
// not write, or when a resign request names it; guardKeys adds the slot key
// once the term holds one. A waiter that lost its keys would otherwise go on renewing a lease
// that blocks every newer term, and a resign aimed at a candidate still in
// its barrier would be lost. Its goroutines end with the term's context;
// Revoke waits for them. Its watches are on a stream of the term's own,
// which the term's waits share and Revoke closes; the stream is asked
// after, and replaced once it stalls (internal/etcdwire/stall.go).
func (t *Term) guard(from int64) {
	s := etcdwire.NewStream(t.c.cfg.Client, t.c.log, t.Key, streamCadence(t.TTL))
	t.watches = s
	t.guards.Go(func() { s.Monitor(t.ctx) })
	t.guardKeys([]owned{{key: t.Key, created: t.Rev, lease: t.Lease}, {key: t.Sentinel, created: t.Rev, lease: t.Lease},
		{key: t.Record, created: t.Rev, value: t.rec.sameTerm}}, true, from)
}

// owned is a key of the term's: deleted, or put again (another lease,
// another create revision, or a value it does not accept), it ends the
// term.
type owned struct {
	key     string
	created int64
	lease   clientv3.LeaseID // the term's, or 0 for its record
	// value, when set, accepts the values the term itself writes: a
	// successor trusts the record's TTL and raft term (clearEnded), so a
	// record rewritten with others must not outlive the child it stands for.
	value func([]byte) bool
}

// rewritten says whether a put of k, on its lease and of its creation,
// holds a value the term did not write.
func (k owned) rewritten(value []byte) bool { return k.value != nil && !k.value(value) }

// guardKeys watches keys, and the resign request when resign is set, from
// revision from on. A watch that stalls silently is the term stream's to
// notice (etcdwire.Stream), at the latest guardEvery(T) + r after it began.
func (t *Term) guardKeys(keys []owned, resign bool, from int64) {
	g := keyGuard{t, keys, resign}
	t.guards.Go(func() { t.lost(g.watch(from)) })
}

// keyGuard is one guardKeys: the keys it watches and how each must stay.
type keyGuard struct {
	t      *Term
	keys   []owned
	resign bool // the term's own guard: also the resign request and the pause
}

// names are the keys watched and read, the resign key last.
func (g keyGuard) names() []string {
	var out []string
	for _, k := range g.keys {
		out = append(out, k.key)
	}
	if g.resign {
		out = append(out, g.t.c.cfg.Layout.ResignKey(), g.t.c.cfg.Layout.PauseKey())
	}
	return out
}

func (g keyGuard) watch(rev int64) error {
	t := g.t
	for {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(t.ctx))
		err := g.follow(wctx, rev)
		cancel()
		if err != nil {
			return err
		}
		if t.ctx.Err() != nil {
			return t.ctx.Err()
		}
		// Compaction, a lost etcd leader or a broken stream: look at the
		// keys themselves, then watch on from what we saw.
		if rev, err = g.check(t.ctx); err != nil {
			return err
		}
		t.c.log.Debug("own keys intact; watching them again", "rev", rev)
	}
}

// follow watches the keys from rev+1 until a change ends the term (the
// error) or a watch is interrupted (nil).
func (g keyGuard) follow(ctx context.Context, rev int64) error {
	names := g.names()
	ws, stop := g.t.guardWatch(ctx, names, rev, clientv3.WithProgressNotify())
	defer stop()
	for {
		var w etcdwire.Watched
		select {
		case w = <-ws:
		case <-ctx.Done():
			return nil
		}
		if !w.OK {
			return nil
		}
		if err := w.Resp.Err(); err != nil {
			if Permanent(err) {
				return fmt.Errorf("watch %s: %w", names[w.I], err)
			}
			g.t.c.log.Debug("own-key watch interrupted; re-reading the key", "error", err)
			return nil
		}
		for _, ev := range w.Resp.Events {
			if err := g.event(ev); err != nil {
				return err
			}
		}
	}
}

// event decides whether one change to a guarded key ends the term.
func (g keyGuard) event(ev *clientv3.Event) error {
	t := g.t
	key := string(ev.Kv.Key)
	if g.resign && key == t.c.cfg.Layout.PauseKey() {
		if ev.Type == clientv3.EventTypePut {
			t.c.log.Info("election paused", "key", key)
			return paused(ev.Kv.ModRevision)
		}
		return nil
	}
	if g.resign && key == t.c.cfg.Layout.ResignKey() {
		if ev.Type == clientv3.EventTypePut && string(ev.Kv.Value) == t.Key {
			t.c.log.Info("resign requested", "key", t.Key)
			return ErrResigned
		}
		return nil
	}
	for _, k := range g.keys {
		if k.key != key {
			continue
		}
		switch {
		case ev.Type == clientv3.EventTypeDelete:
			t.c.log.Warn("key deleted", "key", key, "rev", ev.Kv.ModRevision)
			return ErrKeyDeleted
		case clientv3.LeaseID(ev.Kv.Lease) != k.lease || ev.Kv.CreateRevision != k.created:
			t.c.log.Warn("key replaced", "key", key, "lease", leaseHex(clientv3.LeaseID(ev.Kv.Lease)), "rev", ev.Kv.ModRevision)
			return ErrKeyReplaced
		case k.rewritten(ev.Kv.Value):
			t.c.log.Warn("key rewritten", "key", key, "rev", ev.Kv.ModRevision)
			return ErrKeyReplaced
		}
	}
	return nil
}

// check reads the guarded keys in one read-only transaction, retrying
// transient errors until the term ends. It returns the read's revision, or
// why the term is lost.
func (g keyGuard) check(ctx context.Context) (int64, error) {
	t := g.t
	var ops []clientv3.Op
	for _, k := range g.names() {
		ops = append(ops, clientv3.OpGet(k))
	}
	var resp *clientv3.TxnResponse
	err := retry(ctx, func() error {
		return t.c.request(ctx, t.c.cfg.RequestTimeout, func(rctx context.Context) (err error) {
			resp, err = t.c.cfg.Client.Txn(rctx).Then(ops...).Commit()
			return err
		})
	})
	if err != nil {
		if Permanent(err) {
			return 0, err
		}
		return 0, ctx.Err()
	}
	for i, k := range g.keys {
		kvs := resp.Responses[i].GetResponseRange().Kvs
		if len(kvs) == 0 {
			t.c.log.Warn("key deleted", "key", k.key)
			return 0, fmt.Errorf("re-read: %w", ErrKeyDeleted)
		}
		if clientv3.LeaseID(kvs[0].Lease) != k.lease || kvs[0].CreateRevision != k.created {
			t.c.log.Warn("key replaced", "key", k.key)
			return 0, fmt.Errorf("re-read: %w", ErrKeyReplaced)
		}
		if k.rewritten(kvs[0].Value) {
			t.c.log.Warn("key rewritten", "key", k.key)
			return 0, fmt.Errorf("re-read: %w", ErrKeyReplaced)
		}
	}
	if g.resign {
		if kvs := resp.Responses[len(g.keys)].GetResponseRange().Kvs; len(kvs) > 0 && string(kvs[0].Value) == t.Key {
			t.c.log.Info("resign requested", "key", t.Key)
			return 0, fmt.Errorf("re-read: %w", ErrResigned)
		}
		if kvs := resp.Responses[len(g.keys)+1].GetResponseRange().Kvs; len(kvs) > 0 {
			t.c.log.Info("election paused", "key", g.t.c.cfg.Layout.PauseKey())
			return 0, fmt.Errorf("re-read: %w", paused(kvs[0].ModRevision))
		}
	}
	return resp.Header.Revision, nil
}
