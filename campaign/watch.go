package campaign

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/etcdwire"
)

// watchAll watches each key from rev+1 on the term's stream and sends
// every response on one channel: the term's wait follows a few keys at
// once. A closed watch is sent once, with OK false; the caller reads again
// then. The returned stop ends the watches and returns once the goroutines
// that forward them have ended, so that none outlives its caller; they do
// not wait for the client to close a cancelled watch's channel. While they
// last, the stream is asked after at a wait's cadence (streamCadence).
func (t *Term) watchAll(ctx context.Context, keys []string, rev int64, opts ...clientv3.OpOption) (<-chan etcdwire.Watched, func()) {
	s := t.termStream()
	done := s.Waiting()
	out, stop := s.WatchOn(ctx, ctx, keys, rev, opts...)
	return out, func() {
		stop()
		done()
	}
}

// guardWatch is watchAll for the term's guard, and its watches outlive
// the term's end. Stopped while the term lives (a broken watch, watched
// again), they are cancelled as watchAll's are. Stopped because the term
// ended, they are left open: cancelling each would send etcd a request per
// watch just as the term's revoke goes out, and Revoke closes the stream,
// and every watch on it, with none.
func (t *Term) guardWatch(ctx context.Context, keys []string, rev int64, opts ...clientv3.OpOption) (<-chan etcdwire.Watched, func()) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	out, stop := t.termStream().WatchOn(ctx, wctx, keys, rev, opts...)
	return out, func() {
		stop()
		if t.ctx.Err() == nil {
			cancel()
		}
	}
}

// termStream is the term's stream, once the guard has opened it.
func (t *Term) termStream() *etcdwire.Stream {
	s, _ := t.watches.(*etcdwire.Stream)
	return s
}
