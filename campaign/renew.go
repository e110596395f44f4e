package campaign

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// renewPause is the first pause before an attempt sends again on a fresh
// stream, after the stream it used ended before the attempt's bound; it
// doubles with each try, so that a member that refuses every new stream at
// once (no leader) is not asked in a tight loop.
const renewPause = 50 * time.Millisecond

// errUnanswered ends a stream on which a renewal got no answer within its
// attempt's bound.
var errUnanswered = errors.New("lease renewal stream: no answer in time")

// renewals sends every lease renewal of one client over one LeaseKeepAlive
// stream, opened when first needed and again after it fails, instead of a
// stream per renewal as clientv3's KeepAliveOnce does: a stream costs both
// ends far more than the renewal it carries. The stream is opened on the
// client's own connection, so the interceptors set up with the client
// (auth tokens, the TLS refusals of internal/etcdconn/client.go) apply to
// it, and under clientv3.WithRequireLeader, so that a member that has lost
// its raft leader refuses it rather than holding renewals it cannot pass on.
//
// Crediting answers: etcd's lease server handles one stream's requests one
// at a time, in order, and answers each with its lease id (or ends the
// stream with an error). Each send is recorded, with its send time, before
// it is written, and the senders take turns, so the record is in wire
// order; an answer goes to the oldest unanswered send of its lease on that
// stream, which is the send it answers. Were answers ever reordered, that
// send would be older than the one answered, which only makes the deadline
// earlier. A send is never forgotten while its stream lives, even once its
// attempt has given up: forgetting it would credit its late answer to a
// newer send, with a later send time. Sends die only with their stream, and
// an answer is only ever matched on the stream it came from.
type renewals struct {
	cli *clientv3.Client
	// turn is held to open a stream or to send on it; a channel, so that a
	// renewal waiting for its turn still ends with its bound.
	turn chan struct{}

	mu  sync.Mutex
	cur *keepAliveStream // nil until opened, and once it failed
}

// keepAliveStream is one open LeaseKeepAlive stream and its sends that
// await an answer, in the order they were written.
type keepAliveStream struct {
	stream pb.Lease_LeaseKeepAliveClient
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	pending []*renewalSend
	err     error // why the stream ended; pending is then empty
}

type renewalSend struct {
	lease clientv3.LeaseID
	at    time.Duration // boot-clock time, taken before the write
	done  chan renewalAnswer
}

type renewalAnswer struct {
	ttl int64 // as etcd answered; 0 when the lease is gone
	err error
}

// byClient holds one renewals per client, for as long as the client is open,
// so that every campaigner and term on a client shares one stream.
var byClient sync.Map // *clientv3.Client → *renewals

func renewalsOf(cli *clientv3.Client) *renewals {
	if r, ok := byClient.Load(cli); ok {
		return r.(*renewals)
	}
	r, loaded := byClient.LoadOrStore(cli, &renewals{cli: cli, turn: make(chan struct{}, 1)})
	if !loaded {
		// A stream opened on the client ends with it; so does the entry.
		context.AfterFunc(cli.Ctx(), func() { byClient.Delete(cli) })
	}
	return r.(*renewals)
}

// renew renews lease once, within bound: it returns the send time of the
// request etcd answered and the TTL it answered (0 for a lease that is
// gone). A stream that ends before the bound is replaced and the renewal
// sent again on the new one. A renewal still unanswered when the bound runs
// out (and ctx has not ended) ends its stream: a connection that carries
// nothing (blackholed) is noticed by gRPC's keepalive only after seconds,
// and a new stream may go to another endpoint meanwhile. Giving up because
// ctx ended leaves the stream alone, as its caller simply went away.
func (r *renewals) renew(ctx context.Context, lease clientv3.LeaseID, bound time.Duration, now func() time.Duration) (time.Duration, int64, error) {
	bctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	pause := renewPause
	for {
		ka, s, err := r.send(bctx, lease, now)
		if err == nil {
			select {
			case a := <-s.done:
				if a.err == nil {
					return s.at, a.ttl, nil
				}
				err = a.err
			case <-bctx.Done():
				select {
				case a := <-s.done:
					if a.err == nil {
						return s.at, a.ttl, nil // came in as the bound ran out
					}
				default:
					if ctx.Err() == nil {
						r.drop(ka, errUnanswered)
					}
				}
				return 0, 0, bctx.Err()
			}
		}
		if bctx.Err() != nil {
			return 0, 0, bctx.Err()
		}
		if Permanent(err) || errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return 0, 0, err
		}
		select {
		case <-time.After(pause):
			pause *= 2
		case <-bctx.Done():
			return 0, 0, bctx.Err()
		}
	}
}

// send writes one renewal of lease on the current stream, opening one if
// need be, and returns the stream and the send, which hears its answer.
func (r *renewals) send(ctx context.Context, lease clientv3.LeaseID, now func() time.Duration) (*keepAliveStream, *renewalSend, error) {
	select {
	case r.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	defer func() { <-r.turn }()
	r.mu.Lock()
	ka := r.cur
	r.mu.Unlock()
	if ka == nil {
		var err error
		if ka, err = r.open(ctx); err != nil {
			return nil, nil, err
		}
	}
	s := &renewalSend{lease: lease, done: make(chan renewalAnswer, 1)}
	ka.mu.Lock()
	if ka.err != nil {
		err := ka.err
		ka.mu.Unlock()
		return nil, nil, err
	}
	s.at = now()
	ka.pending = append(ka.pending, s)
	ka.mu.Unlock()
	// A write that cannot go out (flow control on a connection that
	// carries nothing) must not hold the turn past ctx: ending the stream
	// ends the write.
	stop := context.AfterFunc(ctx, func() { r.drop(ka, errUnanswered) })
	err := ka.stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(lease)})
	stop()
	// io.EOF says the stream has ended; the receiver hears why and
	// answers every pending send with it.
	if err != nil && !errors.Is(err, io.EOF) {
		r.drop(ka, err)
	}
	return ka, s, nil
}

// open opens a stream, giving up when ctx ends. The stream itself lives
// with the client, not with ctx, since later renewals use it too.
func (r *renewals) open(ctx context.Context) (*keepAliveStream, error) {
	sctx, cancel := context.WithCancelCause(clientv3.WithRequireLeader(r.cli.Ctx()))
	stop := context.AfterFunc(ctx, func() { cancel(ctx.Err()) })
	stream, err := pb.NewLeaseClient(r.cli.ActiveConnection()).LeaseKeepAlive(sctx, grpc.WaitForReady(true))
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		cancel(err)
		return nil, err
	}
	ka := &keepAliveStream{stream: stream, cancel: cancel}
	r.mu.Lock()
	r.cur = ka
	r.mu.Unlock()
	go r.receive(ka)
	return ka, nil
}

// receive hands each answer to its send until the stream ends.
func (r *renewals) receive(ka *keepAliveStream) {
	for {
		resp, err := ka.stream.Recv()
		if err != nil {
			r.drop(ka, rpctypes.Error(err))
			return
		}
		ka.mu.Lock()
		i := slices.IndexFunc(ka.pending, func(s *renewalSend) bool { return int64(s.lease) == resp.ID })
		var s *renewalSend
		if i >= 0 {
			s = ka.pending[i]
			ka.pending = slices.Delete(ka.pending, i, i+1)
		}
		ka.mu.Unlock()
		if s != nil {
			s.done <- renewalAnswer{ttl: resp.TTL}
		}
	}
}

// drop ends ka, if it has not ended yet, and answers its pending sends
// with err; the next renewal opens a new stream.
func (r *renewals) drop(ka *keepAliveStream, err error) {
	r.mu.Lock()
	if r.cur == ka {
		r.cur = nil
	}
	r.mu.Unlock()
	ka.mu.Lock()
	if ka.err != nil {
		ka.mu.Unlock()
		return
	}
	ka.err = err
	pending := ka.pending
	ka.pending = nil
	ka.mu.Unlock()
	ka.cancel(err)
	for _, s := range pending {
		s.done <- renewalAnswer{err: err}
	}
}
