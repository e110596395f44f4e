package etcdwire

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// pickingClient opens watch streams as the client would, but on a member
// none of avoid names where the balancer offers one within picks tries,
// and remembers which member the last stream it opened is on. Once ended,
// it sends nothing more on its streams and opens none.
type pickingClient struct {
	pb.WatchClient
	picks int
	avoid []string
	ended atomic.Bool
	// fromHistory counts the watches created on the client's streams
	// from a past revision (clientv3's own re-opens of a broken stream
	// among them): until etcd has caught such a watch up, it answers no
	// progress request on its stream (Stream.ask).
	fromHistory atomic.Int64

	mu sync.Mutex
	on string
}

func (p *pickingClient) Watch(ctx context.Context, opts ...grpc.CallOption) (pb.Watch_WatchClient, error) {
	for picks := p.picks; ; picks-- {
		if p.ended.Load() {
			// A status the watcher takes as final: it opens no other.
			return nil, errEnded
		}
		sctx, cancel := context.WithCancel(ctx)
		stream, err := p.WatchClient.Watch(sctx, opts...)
		if err != nil {
			cancel()
			return nil, err
		}
		member := memberOf(stream.Context())
		if repick(member, p.avoid, picks) {
			cancel()
			continue
		}
		// The stream lives as long as the watcher's context, which ends
		// it.
		context.AfterFunc(ctx, cancel)
		p.mu.Lock()
		p.on = member
		p.mu.Unlock()
		return endingStream{stream, p}, nil
	}
}

// end stops every request on the client's streams from then on. A
// clientv3 watcher's Close ends its stream's context and, racing that, may
// still send a cancel for each of its watches (one that heard its watch's
// end first, or an event for a watch whose reader has just gone): ended
// before Close, the stream sends none of them, and its watches end with
// it, as they are meant to.
func (p *pickingClient) end() { p.ended.Store(true) }

var errEnded = status.Error(codes.Canceled, "term stream closed")

// endingStream is a watch stream of p that refuses to send once p ended.
type endingStream struct {
	pb.Watch_WatchClient
	p *pickingClient
}

func (s endingStream) Send(req *pb.WatchRequest) error {
	if s.p.ended.Load() {
		return errEnded
	}
	if c := req.GetCreateRequest(); c != nil && c.StartRevision > 0 {
		s.p.fromHistory.Add(1)
	}
	return s.Watch_WatchClient.Send(req)
}

// memberOf is the address of the member a stream, by its context, is on;
// "" where unknown.
func memberOf(ctx context.Context) string {
	if pr, ok := peer.FromContext(ctx); ok && pr.Addr != nil {
		return pr.Addr.String()
	}
	return ""
}

// repick says that a stream just opened on member should be given up for
// another pick of the balancer: it is on a member avoid names, and this
// was not the last of the picks.
func repick(member string, avoid []string, picks int) bool {
	return picks > 1 && member != "" && slices.Contains(avoid, member)
}

// member is the address of the member the last stream opened is on, ""
// where unknown.
func (p *pickingClient) member() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.on
}

// Hedged runs f, a read, and runs it again every r while no run has
// answered: the balancer may have sent it to a frozen member, whose
// connection looks healthy, and a wait's reads are on the way to the next
// child's start. The first answer counts and ends the other runs; a read
// asked twice is answered the same. It returns f's error when every run
// has failed.
func Hedged[T any](ctx context.Context, r time.Duration, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		v   T
		err error
	}
	answers := make(chan answer)
	run := func() {
		go func() {
			v, err := f(ctx)
			select {
			case answers <- answer{v, err}:
			case <-ctx.Done():
			}
		}()
	}
	again := time.NewTicker(r)
	defer again.Stop()
	run()
	running := 1
	for {
		select {
		case a := <-answers:
			running--
			if a.err == nil || running == 0 {
				return a.v, a.err
			}
		case <-again.C:
			run()
			running++
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
}
