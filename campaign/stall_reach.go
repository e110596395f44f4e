package campaign

import (
	"context"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// pickingClient opens watch streams as the client would, but on a member
// none of avoid names where the balancer offers one within picks tries,
// and remembers which member the last stream it opened is on.
type pickingClient struct {
	pb.WatchClient
	picks int
	avoid []string

	mu sync.Mutex
	on string
}

func (p *pickingClient) Watch(ctx context.Context, opts ...grpc.CallOption) (pb.Watch_WatchClient, error) {
	for picks := p.picks; ; picks-- {
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
		return stream, nil
	}
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

// hedged runs f, a read, and runs it again every r while no run has
// answered: the balancer may have sent it to a frozen member, whose
// connection looks healthy, and a wait's reads are on the way to the next
// child's start. The first answer counts and ends the other runs; a read
// asked twice is answered the same. It returns f's error when every run
// has failed.
func hedged[T any](ctx context.Context, r time.Duration, f func(context.Context) (T, error)) (T, error) {
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
