package etcdwire

import (
	"context"
	"slices"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Watched is one response from one of several watches, by the index of its
// key; OK is false once that watch's channel closed.
type Watched struct {
	I    int
	Resp clientv3.WatchResponse
	OK   bool
}

// WatchOn watches each key from rev+1 on s for as long as wctx lasts, and
// sends what it hears until ctx ends on one channel, by the key's index. A
// closed watch is sent once, with OK false. Events come from rev+1 on,
// each once. The returned stop ends the watches and returns once the
// goroutines that forward them have ended; they do not wait for the
// client to close a cancelled watch's channel. A watch whose stream is replaced, stalled, is
// opened again on the new one from the revision after the last it
// delivered, so that etcd replays what the stalled stream held back.
func (s *Stream) WatchOn(ctx, wctx context.Context, keys []string, rev int64, opts ...clientv3.OpOption) (<-chan Watched, func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	out := make(chan Watched)
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
func forward(ctx context.Context, g *streamGen, ch clientv3.WatchChan, i int, next *int64, out chan<- Watched) bool {
	for {
		w := Watched{I: i}
		select {
		case w.Resp, w.OK = <-ch:
		case <-g.gone:
			return true
		case <-ctx.Done():
			return false
		}
		switch {
		case !w.OK || w.Resp.Err() != nil:
			// The end of a replaced stream is no end of the watch.
			select {
			case <-g.gone:
				return true
			default:
			}
		case w.Resp.IsProgressNotify():
			// Everything up to the answer's revision was delivered.
			*next = max(*next, w.Resp.Header.Revision+1)
			continue
		default:
			w.Resp.Events = slices.DeleteFunc(w.Resp.Events, func(ev *clientv3.Event) bool { return ev.Kv.ModRevision < *next })
			if len(w.Resp.Events) == 0 {
				continue
			}
			*next = w.Resp.Events[len(w.Resp.Events)-1].Kv.ModRevision + 1
		}
		select {
		case out <- w:
		case <-ctx.Done():
			return false
		}
		if !w.OK {
			return false
		}
	}
}
