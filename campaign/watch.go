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
// channel: the term's guard and its wait each follow a few keys at once. A
// closed watch is sent once, with ok false; the caller reads again then.
// The returned stop ends the watches and returns once the goroutines that
// forward them have ended, so that none outlives its caller; they do not
// wait for the client to close a cancelled watch's channel.
func (t *Term) watchAll(ctx context.Context, keys []string, rev int64, opts ...clientv3.OpOption) (<-chan watched, func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	out := make(chan watched)
	for i, k := range keys {
		ch := t.c.cfg.Client.Watch(ctx, k, append([]clientv3.OpOption{clientv3.WithRev(rev + 1)}, opts...)...)
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
