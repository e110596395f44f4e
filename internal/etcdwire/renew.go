package etcdwire

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
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

// Renewals sends every lease renewal of one client over one LeaseKeepAlive
// stream, opened when first needed and again after it fails, instead of a
// stream per renewal as clientv3's KeepAliveOnce does: a stream costs both
// ends far more than the renewal it carries. The stream is opened on the
// client's own connection, so the interceptors set up with the client
// (auth tokens, the TLS refusals of internal/etcdconn/client.go) apply to
// it, and under clientv3.WithRequireLeader, so that a member that has lost
// its raft leader refuses it rather than holding renewals it cannot pass on.
//
// A quiet stream is replaced, not ended. A stream whose oldest unanswered
// send has waited longer than the caller's quiet bound, with nothing heard
// since it was sent, may be on a member that is frozen, or behind a slow
// link. The next send then goes to a new stream, opened on another member
// where the client has one (the balancer picks a member per stream; a stream
// that lands on a member a quiet stream is on is closed and the pick made
// again). The quiet stream lives on as long as an attempt still waits on
// it: on a slow link its answers come, late but in time to help. At most
// one stream per endpoint, plus one, lives at once; at that count the
// sends stay on the newest stream.
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
// an answer is only ever matched on the stream it came from, so answers on
// two streams are each credited to their own send.
type Renewals struct {
	cli *clientv3.Client
	// open opens a stream on a member none of avoid names, where it can:
	// openOn on cli, or a test's fake.
	open func(ctx context.Context, avoid []string) (*keepAliveStream, error)
	// streams is the most streams that live at once.
	streams int
	// turn is held to open a stream or to send on it; a channel, so that a
	// renewal waiting for its turn still ends with its bound.
	turn chan struct{}

	// rev is the highest revision an answer's header named: etcd's
	// revision at the member that answered, which a term's watch stream
	// is held to (Stream.needless).
	rev atomic.Int64
	// raftTerm is the highest raft term a header named, on any request
	// of the client's terms (SeeHeader).
	raftTerm atomic.Int64

	mu   sync.Mutex
	cur  *keepAliveStream   // where sends go: nil until opened, and once it failed
	live []*keepAliveStream // cur and the quiet streams it replaced, while they live
	// beats are the leaders' shared tickers, by renewal interval.
	beats map[time.Duration]*Beat
}

// keepAliveStream is one open LeaseKeepAlive stream and its sends that
// await an answer, in the order they were written.
type keepAliveStream struct {
	stream pb.Lease_LeaseKeepAliveClient
	cancel context.CancelCauseFunc
	member string // the member's address, "" where unknown

	mu      sync.Mutex
	pending []*renewalSend
	heard   time.Time // when the last answer arrived; zero: none yet
	waiting int       // attempts waiting for an answer on this stream
	retired bool      // replaced as cur: it ends once no attempt waits on it
	err     error     // why the stream ended; pending is then empty
}

type renewalSend struct {
	lease clientv3.LeaseID
	at    time.Duration // boot-clock time, taken before the write
	// wall is when it was written, on the monotonic clock, for telling a
	// quiet stream: a judgement of health, not of the deadline.
	wall time.Time
	done chan renewalAnswer
}

type renewalAnswer struct {
	ttl int64 // as etcd answered; 0 when the lease is gone
	rev int64 // etcd's revision at the member that answered
	err error
}

// Renewed is one renewal etcd answered: the boot-clock send time of the
// request it answered, the TTL it answered (0 for a lease that is gone)
// and the revision its answer named.
type Renewed struct {
	At       time.Duration
	TTL, Rev int64
}

// byClient holds one Renewals per client, for as long as the client is open,
// so that every campaigner and term on a client shares one stream.
var byClient sync.Map // *clientv3.Client → *Renewals

// RenewalsOf is the renewals of cli, shared by everyone who renews on it.
func RenewalsOf(cli *clientv3.Client) *Renewals {
	if r, ok := byClient.Load(cli); ok {
		return r.(*Renewals)
	}
	fresh := &Renewals{cli: cli, turn: make(chan struct{}, 1), streams: len(cli.Endpoints()) + 1}
	fresh.open = fresh.openOn
	r, loaded := byClient.LoadOrStore(cli, fresh)
	if !loaded {
		// A stream opened on the client ends with it; so does the entry.
		context.AfterFunc(cli.Ctx(), func() { byClient.Delete(cli) })
	}
	return r.(*Renewals)
}

// Renew renews lease once, within bound: it returns what etcd answered.
// A stream that ends before the bound is replaced and the renewal sent
// again on the new one. A renewal still unanswered at the bound
// leaves its send pending on its stream, so that a late answer is still
// credited to it and to no newer send. quiet is how long a send may go
// unanswered before the stream counts as quiet (see Renewals).
func (r *Renewals) Renew(ctx context.Context, lease clientv3.LeaseID, bound, quiet time.Duration, now func() time.Duration) (Renewed, error) {
	bctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	pause := renewPause
	for {
		ka, s, err := r.send(bctx, lease, quiet, now)
		if err == nil {
			var a renewalAnswer
			select {
			case a = <-s.done:
			case <-bctx.Done():
				select {
				case a = <-s.done: // came in as the bound ran out
				default:
					a.err = bctx.Err()
				}
			}
			r.leave(ka)
			if a.err == nil {
				return Renewed{At: s.at, TTL: a.ttl, Rev: a.rev}, nil
			}
			err = a.err
		}
		if bctx.Err() != nil {
			return Renewed{}, bctx.Err()
		}
		if Refused(err) || errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return Renewed{}, err
		}
		select {
		case <-time.After(pause):
			pause *= 2
		case <-bctx.Done():
			return Renewed{}, bctx.Err()
		}
	}
}

// send writes one renewal of lease on the current stream, opening one if
// there is none or the current one is quiet, and returns the stream and the
// send, which hears its answer. The caller waits on the stream until it
// calls leave.
func (r *Renewals) send(ctx context.Context, lease clientv3.LeaseID, quiet time.Duration, now func() time.Duration) (*keepAliveStream, *renewalSend, error) {
	select {
	case r.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	defer func() { <-r.turn }()
	ka, err := r.stream(ctx, quiet)
	if err != nil {
		return nil, nil, err
	}
	s := &renewalSend{lease: lease, done: make(chan renewalAnswer, 1)}
	ka.mu.Lock()
	if ka.err != nil {
		err := ka.err
		ka.mu.Unlock()
		return nil, nil, err
	}
	s.at, s.wall = now(), time.Now()
	ka.pending = append(ka.pending, s)
	ka.waiting++
	ka.mu.Unlock()
	// A write that cannot go out (flow control on a connection that
	// carries nothing) must not hold the turn past ctx: ending the stream
	// ends the write.
	stop := context.AfterFunc(ctx, func() { r.drop(ka, ctx.Err()) })
	err = ka.stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(lease)})
	stop()
	// io.EOF says the stream has ended; the receiver hears why and
	// answers every pending send with it.
	if err != nil && !errors.Is(err, io.EOF) {
		r.drop(ka, err)
	}
	return ka, s, nil
}

// stream is the stream to send on: cur, unless there is none or it is
// quiet and another may be opened.
func (r *Renewals) stream(ctx context.Context, quiet time.Duration) (*keepAliveStream, error) {
	r.mu.Lock()
	ka := r.cur
	var avoid []string // members that quiet streams are on
	for _, l := range r.live {
		if l.quiet(quiet) && l.member != "" {
			avoid = append(avoid, l.member)
		}
	}
	room := len(r.live) < r.streams
	r.mu.Unlock()
	if ka != nil && (!room || !ka.quiet(quiet)) {
		return ka, nil
	}
	fresh, err := r.open(ctx, avoid)
	if err != nil {
		if ka != nil {
			return ka, nil // a quiet stream is still better than none
		}
		return nil, err
	}
	r.mu.Lock()
	old := r.cur
	r.cur = fresh
	r.live = append(r.live, fresh)
	r.mu.Unlock()
	if old != nil {
		r.retire(old)
	}
	return fresh, nil
}

// quiet says whether ka's oldest unanswered send is at least bound old
// with nothing heard on ka since it was sent.
func (ka *keepAliveStream) quiet(bound time.Duration) bool {
	ka.mu.Lock()
	defer ka.mu.Unlock()
	return len(ka.pending) > 0 && time.Since(ka.pending[0].wall) >= bound && ka.heard.Before(ka.pending[0].wall)
}

// retire marks ka as replaced, ending it at once when no attempt waits on
// it.
func (r *Renewals) retire(ka *keepAliveStream) {
	ka.mu.Lock()
	ka.retired = true
	idle := ka.waiting == 0
	ka.mu.Unlock()
	if idle {
		r.drop(ka, errRetired)
	}
}

// errRetired ends a stream that was replaced and that no attempt waits on.
var errRetired = errors.New("lease renewal stream: replaced")

// leave records that an attempt waits no longer on ka; a retired stream
// ends with its last attempt.
func (r *Renewals) leave(ka *keepAliveStream) {
	ka.mu.Lock()
	ka.waiting--
	idle := ka.retired && ka.waiting == 0
	ka.mu.Unlock()
	if idle {
		r.drop(ka, errRetired)
	}
}

// openOn opens a stream on r.cli, giving up when ctx ends, on a member none
// of avoid names where the balancer offers one within a few picks. The
// stream itself lives with the client, not with ctx, since later renewals
// use it too.
func (r *Renewals) openOn(ctx context.Context, avoid []string) (*keepAliveStream, error) {
	for picks := 2 * len(r.cli.Endpoints()); ; picks-- {
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
		ka := &keepAliveStream{stream: stream, cancel: cancel, member: memberOf(stream.Context())}
		if repick(ka.member, avoid, picks) {
			cancel(errRetired)
			continue
		}
		go r.receive(ka)
		return ka, nil
	}
}

// receive hands each answer to its send until the stream ends.
func (r *Renewals) receive(ka *keepAliveStream) {
	for {
		resp, err := ka.stream.Recv()
		if err != nil {
			r.drop(ka, rpctypes.Error(err))
			return
		}
		var rev int64
		if resp.Header != nil {
			rev = resp.Header.Revision
			r.seen(rev)
			r.SeeHeader(resp.Header)
		}
		ka.mu.Lock()
		i := slices.IndexFunc(ka.pending, func(s *renewalSend) bool { return int64(s.lease) == resp.ID })
		var s *renewalSend
		if i >= 0 {
			s = ka.pending[i]
			ka.pending = slices.Delete(ka.pending, i, i+1)
			ka.heard = time.Now()
		}
		ka.mu.Unlock()
		if s != nil {
			s.done <- renewalAnswer{ttl: resp.TTL, rev: rev}
		}
	}
}

// seen records that etcd's revision is at least rev.
func (r *Renewals) seen(rev int64) { raise(&r.rev, rev) }

// Revision is the highest revision an answer to a renewal named.
func (r *Renewals) Revision() int64 { return r.rev.Load() }

// SeeHeader records that etcd's raft term is at least h's: every answer on
// the client, renewals and the protocol's own requests, feeds it.
func (r *Renewals) SeeHeader(h *pb.ResponseHeader) {
	if h != nil {
		raise(&r.raftTerm, int64(h.RaftTerm))
	}
}

// RaftTerm is the highest raft term any answer on the client named.
func (r *Renewals) RaftTerm() uint64 { return uint64(r.raftTerm.Load()) }

// raise sets a to v if v is greater: a value that only moves forward,
// whatever order concurrent writers come in.
func raise(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// drop ends ka, if it has not ended yet, and answers its pending sends
// with err; the next renewal opens a new stream.
func (r *Renewals) drop(ka *keepAliveStream, err error) {
	r.mu.Lock()
	if r.cur == ka {
		r.cur = nil
	}
	r.live = slices.DeleteFunc(r.live, func(l *keepAliveStream) bool { return l == ka })
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
