package etcdwire

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// fakeStream is a LeaseKeepAlive stream whose answers the test writes, in
// the order etcd would.
type fakeStream struct {
	grpc.ClientStream
	sent    chan clientv3.LeaseID
	answers chan *pb.LeaseKeepAliveResponse
	ended   chan struct{}
	end     sync.Once
	err     error
}

func newFakeStream() *fakeStream {
	return &fakeStream{sent: make(chan clientv3.LeaseID, 16), answers: make(chan *pb.LeaseKeepAliveResponse),
		ended: make(chan struct{})}
}

func (f *fakeStream) Send(req *pb.LeaseKeepAliveRequest) error {
	select {
	case <-f.ended:
		return io.EOF
	default:
	}
	f.sent <- clientv3.LeaseID(req.ID)
	return nil
}

func (f *fakeStream) Recv() (*pb.LeaseKeepAliveResponse, error) {
	select {
	case a := <-f.answers:
		return a, nil
	case <-f.ended:
		return nil, f.err
	}
}

func (f *fakeStream) close(err error) {
	f.end.Do(func() {
		f.err = err
		close(f.ended)
	})
}

func (f *fakeStream) answer(t *testing.T, lease clientv3.LeaseID, ttl int64) {
	t.Helper()
	select {
	case f.answers <- &pb.LeaseKeepAliveResponse{ID: int64(lease), TTL: ttl}:
	case <-time.After(10 * time.Second):
		t.Fatal("the receiver took no answer")
	}
}

func (f *fakeStream) awaitSend(t *testing.T, want clientv3.LeaseID) {
	t.Helper()
	select {
	case got := <-f.sent:
		if got != want {
			t.Fatalf("sent a renewal of %x, want %x", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no renewal of %x sent", want)
	}
}

// withFake returns renewals whose current stream is f, as open would set
// it up; a stream it opens later is the next of more, and none once they
// are used up.
func withFake(f *fakeStream, more ...*fakeStream) (*Renewals, *keepAliveStream) {
	r := &Renewals{turn: make(chan struct{}, 1), streams: 2}
	r.open = func(context.Context, []string) (*keepAliveStream, error) {
		if len(more) == 0 {
			return nil, errors.New("no more fake streams")
		}
		ka := fakeKeepAlive(r, more[0])
		more = more[1:]
		return ka, nil
	}
	ka := fakeKeepAlive(r, f)
	r.cur, r.live = ka, []*keepAliveStream{ka}
	return r, ka
}

func fakeKeepAlive(r *Renewals, f *fakeStream) *keepAliveStream {
	ka := &keepAliveStream{stream: f, cancel: func(err error) { f.close(err) }}
	go r.receive(ka)
	return ka
}

func (r *Renewals) current() *keepAliveStream {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// awaitTurnFree waits until no send holds the turn.
func awaitTurnFree(t *testing.T, r *Renewals) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(r.turn) > 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the send kept its turn")
		}
	}
}

type renewResult struct {
	at  time.Duration
	ttl int64
	err error
}

// never is a quiet bound that no test reaches.
const never = time.Hour

func renewAsync(r *Renewals, ctx context.Context, lease clientv3.LeaseID, bound, quiet time.Duration, now func() time.Duration) <-chan renewResult {
	out := make(chan renewResult, 1)
	go func() {
		a, err := r.Renew(ctx, lease, bound, quiet, now)
		out <- renewResult{a.At, a.TTL, err}
	}()
	return out
}

func awaitRenew(t *testing.T, ch <-chan renewResult) renewResult {
	t.Helper()
	select {
	case res := <-ch:
		return res
	case <-time.After(10 * time.Second):
		t.Fatal("the renewal did not end")
	}
	return renewResult{}
}

// An answer goes to the oldest unanswered send of its lease on its stream,
// even when that send's caller has given up: etcd answers a stream's
// requests in order, so crediting it to a newer send would count the TTL
// from a send time later than etcd's renewal, and the deadline would run
// past etcd's expiry.
func TestRenewalAnswersCreditedInOrder(t *testing.T) {
	f := newFakeStream()
	r, ka := withFake(f)
	defer f.close(errors.New("test over"))
	var clock atomic.Int64
	now := func() time.Duration { return time.Duration(clock.Load()) }
	const L, M = clientv3.LeaseID(0x10), clientv3.LeaseID(0x20)

	// A renewal of L sent at 1s whose caller goes away before the answer.
	clock.Store(int64(1 * time.Second))
	gone, leave := context.WithCancel(context.Background())
	abandoned := renewAsync(r, gone, L, time.Hour, never, now)
	f.awaitSend(t, L)
	// The turn comes back only once the write has returned: a caller that
	// leaves while its write is still under way (it may be stuck) ends the
	// stream, and one that leaves after must not.
	awaitTurnFree(t, r)
	leave()
	if res := awaitRenew(t, abandoned); !errors.Is(res.err, context.Canceled) {
		t.Fatalf("abandoned renewal = %+v, want context.Canceled", res)
	}
	if r.current() != ka {
		t.Fatal("a caller going away ended the stream")
	}

	// Renewals of M at 2s and of L at 3s; etcd answers the three in order,
	// the abandoned one with TTL 10, the last one with TTL 20.
	clock.Store(int64(2 * time.Second))
	m := renewAsync(r, context.Background(), M, time.Hour, never, now)
	f.awaitSend(t, M)
	clock.Store(int64(3 * time.Second))
	l := renewAsync(r, context.Background(), L, time.Hour, never, now)
	f.awaitSend(t, L)
	f.answer(t, L, 10)
	f.answer(t, M, 15)
	if res := awaitRenew(t, m); res.err != nil || res.at != 2*time.Second || res.ttl != 15 {
		t.Fatalf("renewal of M = %+v, want sent at 2s, TTL 15", res)
	}
	f.answer(t, L, 20)
	if res := awaitRenew(t, l); res.err != nil || res.at != 3*time.Second || res.ttl != 20 {
		t.Fatalf("renewal of L = %+v, want sent at 3s with TTL 20: the answer to the abandoned send was credited to it", res)
	}
}

// A renewal that gets no answer within its bound leaves its stream alone
// and its send pending: on a slow link the answer still comes, and must be
// credited to that send, not to the next. A stream that fails answers
// every send pending on it with etcd's error.
func TestRenewalStreamEnds(t *testing.T) {
	var clock atomic.Int64
	now := func() time.Duration { return time.Duration(clock.Add(1)) }
	const L, M = clientv3.LeaseID(0x10), clientv3.LeaseID(0x20)

	t.Run("unanswered", func(t *testing.T) {
		f := newFakeStream()
		r, ka := withFake(f)
		defer f.close(errors.New("test over"))
		res := awaitRenew(t, renewAsync(r, context.Background(), L, 50*time.Millisecond, never, now))
		if !errors.Is(res.err, context.DeadlineExceeded) {
			t.Fatalf("unanswered renewal = %+v, want context.DeadlineExceeded", res)
		}
		f.awaitSend(t, L)
		select {
		case <-f.ended:
			t.Fatal("an attempt's bound ended its stream")
		default:
		}
		ka.mu.Lock()
		pending := len(ka.pending)
		ka.mu.Unlock()
		if r.current() != ka || pending != 1 {
			t.Fatalf("after the bound: current stream %p (want %p), %d pending (want 1)", r.current(), ka, pending)
		}
		l := renewAsync(r, context.Background(), L, time.Hour, never, now)
		f.awaitSend(t, L)
		f.answer(t, L, 10) // the late answer to the first send
		f.answer(t, L, 20)
		if res := awaitRenew(t, l); res.err != nil || res.ttl != 20 {
			t.Fatalf("renewal after an unanswered one = %+v, want TTL 20: the late answer was credited to it", res)
		}
	})

	t.Run("failed", func(t *testing.T) {
		f := newFakeStream()
		r, _ := withFake(f)
		l := renewAsync(r, context.Background(), L, time.Hour, never, now)
		f.awaitSend(t, L)
		m := renewAsync(r, context.Background(), M, time.Hour, never, now)
		f.awaitSend(t, M)
		f.close(rpctypes.ErrGRPCPermissionDenied)
		for _, ch := range []<-chan renewResult{l, m} {
			if res := awaitRenew(t, ch); !errors.Is(res.err, rpctypes.ErrPermissionDenied) || !Refused(res.err) {
				t.Errorf("renewal on a refused stream = %+v, want etcd's permanent ErrPermissionDenied", res)
			}
		}
	})
}

// A stream whose renewal goes unanswered past the quiet bound is replaced
// for the next send, and lives on while an attempt waits on it. Answers on
// the two streams are each credited to their own send: the late answer on
// the quiet stream to its older send time, never to the newer send of the
// other stream, so overlapping attempts never count a TTL from a send time
// later than the request etcd renewed for.
func TestQuietStreamReplaced(t *testing.T) {
	var clock atomic.Int64
	now := func() time.Duration { return time.Duration(clock.Load()) }
	const L = clientv3.LeaseID(0x10)
	const quiet = 20 * time.Millisecond
	a, b := newFakeStream(), newFakeStream()
	r, ka := withFake(a, b)
	defer a.close(errors.New("test over"))
	defer b.close(errors.New("test over"))

	clock.Store(int64(1 * time.Second))
	first := renewAsync(r, context.Background(), L, time.Hour, quiet, now)
	a.awaitSend(t, L)
	awaitTurnFree(t, r)
	time.Sleep(2 * quiet) // the quiet bound is the subject: it must pass unanswered
	clock.Store(int64(2 * time.Second))
	second := renewAsync(r, context.Background(), L, time.Hour, quiet, now)
	b.awaitSend(t, L)
	if r.current() == ka {
		t.Fatal("the send went to a new stream, but the quiet one is still current")
	}
	select {
	case <-a.ended:
		t.Fatal("the quiet stream ended while an attempt waited on it")
	default:
	}
	b.answer(t, L, 10)
	if res := awaitRenew(t, second); res.err != nil || res.at != 2*time.Second {
		t.Fatalf("renewal on the new stream = %+v, want sent at 2s", res)
	}
	a.answer(t, L, 10)
	if res := awaitRenew(t, first); res.err != nil || res.at != 1*time.Second || res.ttl != 10 {
		t.Fatalf("late renewal on the quiet stream = %+v, want sent at 1s with TTL 10", res)
	}
	select {
	case <-a.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the quiet stream lived on once no attempt waited on it")
	}
	third := renewAsync(r, context.Background(), L, time.Hour, quiet, now)
	b.awaitSend(t, L)
	b.answer(t, L, 10)
	if res := awaitRenew(t, third); res.err != nil {
		t.Fatalf("renewal after the replacement = %+v", res)
	}
}
