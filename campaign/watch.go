package campaign

import (
	"context"

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
// channel, until ctx ends: the term's guard and its wait each follow a few
// keys at once. A closed watch is sent once, with ok false; the caller
// reads again then.
func (t *Term) watchAll(ctx context.Context, keys []string, rev int64, opts ...clientv3.OpOption) <-chan watched {
	out := make(chan watched)
	for i, k := range keys {
		ch := t.c.cfg.Client.Watch(ctx, k, append([]clientv3.OpOption{clientv3.WithRev(rev + 1)}, opts...)...)
		go func() {
			for {
				resp, ok := <-ch
				select {
				case out <- watched{i, resp, ok}:
				case <-ctx.Done():
					return
				}
				if !ok {
					return
				}
			}
		}()
	}
	return out
}
