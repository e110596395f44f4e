package etcdwire

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The stall bound starts at Cadence.Stall, doubles for each stream in a row that
// answers nothing, never passes Cadence.Max, and after an answer is twice what the
// answer took: a slow link settles on one stream instead of replacing one
// after another, and a fast one comes back to where it started.
func TestNextBound(t *testing.T) {
	c := Cadence{Stall: 200 * time.Millisecond, Max: time.Second} // campaign's at T = 2 s
	var got []time.Duration
	b := c.Stall
	for range 4 {
		b = c.nextBound(b, -1)
		got = append(got, b)
	}
	want := []time.Duration{400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("bounds after streams that answered nothing: %v, want %v", got, want)
		}
	}
	for _, tc := range []struct{ bound, took, want time.Duration }{
		{time.Second, 700 * time.Millisecond, time.Second},                       // a slow answer: twice it, capped at Max
		{800 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond}, // twice what it took
		{time.Second, 5 * time.Millisecond, 200 * time.Millisecond},              // a fast answer: back to Stall
	} {
		if b := c.nextBound(tc.bound, tc.took); b != tc.want {
			t.Errorf("after an answer in %v (bound %v): %v, want %v", tc.took, tc.bound, b, tc.want)
		}
	}
}

// sendCounter is a watch stream that counts what it is asked to send.
type sendCounter struct {
	pb.Watch_WatchClient
	sent int
}

func (s *sendCounter) Send(*pb.WatchRequest) error { s.sent++; return nil }

func (s *sendCounter) Context() context.Context { return context.Background() }

type streamOpener struct {
	pb.WatchClient
	stream *sendCounter
}

func (o streamOpener) Watch(context.Context, ...grpc.CallOption) (pb.Watch_WatchClient, error) {
	return o.stream, nil
}

// A term stream's client, once ended, sends nothing on the streams it
// opened and opens none: clientv3's watcher may send a cancel for each
// watch as it closes (pickingClient.end), and a handoff asks etcd for
// nothing the promise does not need (TestHandoffRequests).
func TestEndedClientSendsNothing(t *testing.T) {
	counter := &sendCounter{}
	p := &pickingClient{WatchClient: streamOpener{stream: counter}, picks: 1}
	s, err := p.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cancel := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{}}}
	if err := s.Send(cancel); err != nil || counter.sent != 1 {
		t.Fatalf("before its end: Send = %v, %d sent, want nil and 1", err, counter.sent)
	}
	p.end()
	if err := s.Send(cancel); err == nil || counter.sent != 1 {
		t.Fatalf("after its end: Send = %v, %d sent, want an error and still 1", err, counter.sent)
	}
	if _, err := p.Watch(t.Context()); status.Code(err) != codes.Canceled {
		t.Fatalf("a stream opened after its end: %v, want %s, which the watcher takes as final", err, codes.Canceled)
	}
}

// An answer that came in as the bound ran out counts: a process starved
// of CPU finds the answer and the expired timer ready at once, and a
// select between them would judge a stream that answered silent, half the
// time, and replace it.
func TestHeardCountsAnAnswerThatCameAsTheBoundRanOut(t *testing.T) {
	for i := range 200 {
		probe := make(chan clientv3.WatchResponse, 1)
		probe <- clientv3.WatchResponse{Header: pb.ResponseHeader{Revision: 7}}
		rev, progress, ended := heard(t.Context(), probe, 0)
		if rev != 7 || !progress || ended {
			t.Fatalf("try %d: heard = %d, %v, %v with an answer waiting at the bound; want 7, true, false", i, rev, progress, ended)
		}
	}
}

// progressCounter is a watcher that counts the progress requests sent on
// it and answers none.
type progressCounter struct {
	clientv3.Watcher
	sent atomic.Int32
}

func (p *progressCounter) RequestProgress(context.Context) error {
	p.sent.Add(1)
	return nil
}

// A stream is asked again within one bound only while a watch created on
// it from history since it last answered may still be catching up, which
// etcd answers no progress request before: a stream that is only slow to
// answer, or a process starved of CPU, costs etcd one request per question
// rather than four. The first answer records what it vouches for.
func TestAskAgainOnlyWhileAWatchCatchesUp(t *testing.T) {
	// Long enough that a test machine's stall cannot swallow the asks
	// again, a quarter of it apart, that the second case looks for.
	const bound = time.Second
	w := &progressCounter{}
	g := &streamGen{w: w, client: &pickingClient{}, ctx: t.Context()}
	s := &Stream{}
	silent := make(chan clientv3.WatchResponse)

	var synced int64
	if rev, ended := s.ask(t.Context(), g, silent, bound, &synced); rev != 0 || ended {
		t.Fatalf("ask of a silent stream = %d, %v; want 0, false", rev, ended)
	}
	if n := w.sent.Load(); n != 1 {
		t.Fatalf("a silent stream with every watch caught up was sent %d progress requests within one bound, want 1", n)
	}

	w.sent.Store(0)
	g.client.fromHistory.Store(2) // two watches opened from history since
	if _, _ = s.ask(t.Context(), g, silent, bound, &synced); w.sent.Load() < 2 {
		t.Fatalf("a silent stream with a watch catching up was sent %d progress requests within one bound, want it asked again", w.sent.Load())
	}

	answer := make(chan clientv3.WatchResponse, 1)
	answer <- clientv3.WatchResponse{Header: pb.ResponseHeader{Revision: 9}}
	if rev, _ := s.ask(t.Context(), g, answer, bound, &synced); rev != 9 || synced != 2 {
		t.Fatalf("after an answer: rev %d, synced %d; want 9 and 2, the watches it vouches for", rev, synced)
	}
}
