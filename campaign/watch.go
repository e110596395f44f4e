package campaign

import (
	"context"
	"slices"
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

// watchAll watches each key from rev+1 on the term's stream and sends
// every response on one channel: the term's wait follows a few keys at
// once. A closed watch is sent once, with ok false; the caller reads again
// then. The returned stop ends the watches and returns once the goroutines
// that forward them have ended, so that none outlives its caller; they do
// not wait for the client to close a cancelled watch's channel. While they
// last, the stream is asked after at a wait's cadence (termStream).
func (t *Term) watchAll(ctx context.Context, keys []string, rev int64, opts ...clientv3.OpOption) (<-chan watched, func()) {
	s := t.termStream()
	done := s.waiting()
	out, stop := t.watchOn(s, ctx, ctx, keys, rev, opts...)
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
func (t *Term) guardWatch(ctx context.Context, keys []string, rev int64, opts ...clientv3.OpOption) (<-chan watched, func()) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	out, stop := t.watchOn(t.termStream(), ctx, wctx, keys, rev, opts...)
	return out, func() {
		stop()
		if t.ctx.Err() == nil {
			cancel()
		}
	}
}

// watchOn watches keys on s for as long as wctx lasts, and forwards what
// it hears until ctx ends. A watch whose stream is replaced, stalled, is
// opened again on the new one from the revision after the last it
// delivered, so that etcd replays what the stalled stream held back.
func (t *Term) watchOn(s *termStream, ctx, wctx context.Context, keys []string, rev int64, opts ...clientv3.OpOption) (<-chan watched, func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	out := make(chan watched)
	for i, k := range keys {
		wg.Go(func() {
			next := rev + 1
			for {
				g := s.current()
				gctx, end := context.WithCancel(wctx)
				context.AfterFunc(g.ctx, end)
				// From the revision before next, which etcd has reached
				// already: a watch from a revision it has not reached
				// holds up every progress answer on its stream until it
				// does, which in an idle election is never. What that
				// revision replays, forward drops.
				ch := g.w.Watch(gctx, k, append([]clientv3.OpOption{clientv3.WithRev(next - 1)}, opts...)...)
				if !forward(ctx, g, ch, i, &next, out) {
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

// forward sends what ch hears on out, as watch i, until ctx ends or the
// watch closes (false), or until its stream is replaced (true: open it
// again from next). It sends events from next on, each once, and errors;
// progress answers only move next on.
func forward(ctx context.Context, g *streamGen, ch clientv3.WatchChan, i int, next *int64, out chan<- watched) bool {
	for {
		w := watched{i: i}
		select {
		case w.resp, w.ok = <-ch:
		case <-g.gone:
			return true
		case <-ctx.Done():
			return false
		}
		switch {
		case !w.ok || w.resp.Err() != nil:
			// The end of a replaced stream is no end of the watch.
			select {
			case <-g.gone:
				return true
			default:
			}
		case w.resp.IsProgressNotify():
			// Everything up to the answer's revision was delivered.
			*next = max(*next, w.resp.Header.Revision+1)
			continue
		default:
			w.resp.Events = slices.DeleteFunc(w.resp.Events, func(ev *clientv3.Event) bool { return ev.Kv.ModRevision < *next })
			if len(w.resp.Events) == 0 {
				continue
			}
			*next = w.resp.Events[len(w.resp.Events)-1].Kv.ModRevision + 1
		}
		select {
		case out <- w:
		case <-ctx.Done():
			return false
		}
		if !w.ok {
			return false
		}
	}
}
