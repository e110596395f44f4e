package campaign

import (
	"context"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// watched is one response from one of several watches, by the index of its
// key; ok is false once that watch's channel closed.
type watched struct {
	i    int
	resp clientv3.WatchResponse
	ok   bool
}

// watchAll watches each key from rev+1 and sends every response on one
// channel: the term's wait follows a few keys at once. A closed watch is
// sent once, with ok false; the caller reads again then. The returned stop
// ends the watches and returns once the goroutines that forward them have
// ended, so that none outlives its caller; they do not wait for the client
// to close a cancelled watch's channel.
func (t *Term) watchAll(ctx context.Context, keys []string, rev int64, opts ...clientv3.OpOption) (<-chan watched, func()) {
	return t.watchOn(t.c.cfg.Client, ctx, ctx, keys, rev, opts...)
}

// guardWatch is watchAll for the term's guard: on the term's own watch
// stream, and its watches outlive the term's end. Stopped while the term
// lives (a broken watch, watched again), they are cancelled as watchAll's
// are. Stopped because the term ended, they are left open: cancelling each
// would send etcd a request per watch just as the term's revoke goes out,
// and Revoke closes the stream, and every watch on it, with none.
func (t *Term) guardWatch(ctx context.Context, keys []string, rev int64, opts ...clientv3.OpOption) (<-chan watched, func()) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	out, stop := t.watchOn(t.watches, ctx, wctx, keys, rev, opts...)
	return out, func() {
		stop()
		if t.ctx.Err() == nil {
			cancel()
		}
	}
}

// watchOn watches keys on w for as long as wctx lasts, and forwards what
// it hears until ctx ends.
func (t *Term) watchOn(w clientv3.Watcher, ctx, wctx context.Context, keys []string, rev int64, opts ...clientv3.OpOption) (<-chan watched, func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	out := make(chan watched)
	for i, k := range keys {
		ch := w.Watch(wctx, k, append([]clientv3.OpOption{clientv3.WithRev(rev + 1)}, opts...)...)
		wg.Go(func() {
			for {
				var w watched
				select {
				case w.resp, w.ok = <-ch:
				case <-ctx.Done():
					return
				}
				w.i = i
				select {
				case out <- w:
				case <-ctx.Done():
					return
				}
				if !w.ok {
					return
				}
			}
		})
	}
	return out, func() {
		cancel()
		wg.Wait()
	}
}
