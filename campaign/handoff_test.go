package campaign_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// wire records what a client sends etcd while it is on: each unary
// request by method, and each message on a stream by the stream's method,
// with the boot-clock time it was recorded at.
type wire struct {
	mu   sync.Mutex
	on   bool
	sent []string
	// at is when each of sent was recorded: a unary request as it goes
	// out, a stream's message once it went out (so never before the time
	// its sender read for it).
	at []time.Duration
}

func (w *wire) add(what string) {
	at := bootclock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.on {
		w.sent = append(w.sent, what)
		w.at = append(w.at, at)
	}
}

// record turns recording on or off and returns what was recorded since
// the last call.
func (w *wire) record(on bool) []string {
	sent, _ := w.recordAt(on)
	return sent
}

// recordAt is record, with the time each message was recorded at.
func (w *wire) recordAt(on bool) ([]string, []time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.on = on
	sent, at := w.sent, w.at
	w.sent, w.at = nil, nil
	return sent, at
}

// await waits until n recorded messages contain s.
func (w *wire) await(t *testing.T, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(safety)
	for {
		w.mu.Lock()
		seen := 0
		for _, m := range w.sent {
			if strings.Contains(m, s) {
				seen++
			}
		}
		w.mu.Unlock()
		if seen >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages with %q sent within %s, want %d", seen, s, safety, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type wireStream struct {
	grpc.ClientStream
	w      *wire
	method string
}

// SendMsg records the messages that went out: a stream that was closed
// refuses them.
func (s wireStream) SendMsg(m any) error {
	err := s.ClientStream.SendMsg(m)
	if err == nil {
		s.w.add(fmt.Sprintf("%s %v", s.method, m))
	}
	return err
}

// wiredClient is a client of its own, as each etcdlead process has, whose
// requests w records.
func wiredClient(t *testing.T, c *etcdtest.Cluster, w *wire) *clientv3.Client {
	cfg := etcdtest.ClientConfig(c.Endpoints()...)
	cfg.DialOptions = append(cfg.DialOptions,
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			w.add(method)
			return invoke(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return wireStream{cs, w, method}, nil
		}))
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// A graceful handoff asks etcd for what the promise needs and nothing
// more: the old leader's end, one transaction that deletes its record and
// keys (only the record's end by its term proves the old child gone), then
// its revoke, and the next leader's start read and the cancel of its
// wait's watch, which shares the term's stream with
// its guard (campaign/stall.go: one progress request asks after both). The
// old leader cancels no watch (its guard closes its stream), and the new
// leader renews no sooner and no more often than its cadence demands: r
// after its last credited send as a waiter (here its grant: waiters renew
// every T/3), then every r (campaign/lead.go, firstRenewal). It holds a
// deadline from that send, so a handoff within r of it adds no renewal;
// one later adds the renewal that keeps the term's room for a round trip
// from its start.
func TestHandoffRequests(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	cluster := etcdtest.Start(t, etcdtest.Options{})
	var oldWire, newWire wire
	fa := newFixture(t, wiredClient(t, cluster, &oldWire))
	fb := newFixture(t, wiredClient(t, cluster, &newWire))
	// Waiters renew every T/3: none falls in the handoff at this TTL.
	fa.ttl, fb.ttl = 30*time.Second, 30*time.Second
	fb.n = 1 // ids apart
	a := fa.lead()
	hctx, stop := context.WithCancel(t.Context())
	held := make(chan error, 1)
	go func() { held <- a.Lead(hctx, func(time.Duration) {}) }()
	newWire.record(true)
	b := fb.waiting(t.Context(), 1)
	key := newest(t, fb.cli, fb.l)
	fb.next(b, key)
	// Its guard's watches (its two keys' and the resign key's, each opened
	// on its own), its wait's and its stream's probe (on its queue key,
	// from now) are in place. The watcher opens one at a time, each once
	// the one before is answered, so the last may go out well after the
	// wait began.
	for _, k := range []string{key, fb.l.SentinelPrefix() + strings.TrimPrefix(key, fb.l.QueuePrefix()), fb.l.ResignKey(), a.Sentinel} {
		newWire.await(t, `create_request:<key:"`+k+`" start_revision`, 1)
	}
	newWire.await(t, `create_request:<key:"`+key+`" >`, 1)

	stop()
	<-held
	oldWire.record(true)
	newWire.record(true)
	a.Revoke()
	bt := fb.await(b)
	// The new leader's last credited send, read before Lead can credit
	// another: its deadline less the TTL, which etcd answers to every grant
	// and renewal of the lease.
	r := campaign.DefaultRenewInterval(bt.TTL)
	due := bt.Deadline() - bt.TTL + r
	leading := bootclock.Now()
	// As the runner does: the child starts, and the term is held.
	bctx, bstop := context.WithCancel(t.Context())
	bheld := make(chan error, 1)
	go func() { bheld <- bt.Lead(bctx, func(time.Duration) {}) }()
	time.Sleep(quiet) // anything the handoff sets off arrives by now
	bstop()
	<-bheld
	ended := bootclock.Now() // no renewal outlives Lead
	// Progress requests come at the term stream's cadence, whether a
	// handoff falls between two or not.
	progress := func(m string) bool { return strings.Contains(m, "progress_request") }
	if got := slices.DeleteFunc(oldWire.record(false), progress); !slices.Equal(got, []string{"/etcdserverpb.KV/Txn", "/etcdserverpb.Lease/LeaseRevoke"}) {
		t.Errorf("the old leader sent %q in the handoff, want its end and its revoke", got)
	}
	sent, at := newWire.recordAt(false)
	var got []string
	var renewed []time.Duration
	for i, m := range sent {
		switch {
		case progress(m):
		case strings.HasPrefix(m, "/etcdserverpb.Lease/LeaseKeepAlive "):
			renewed = append(renewed, at[i])
		case strings.Contains(m, "cancel_request"):
			// Which watch id, the order of creation on the stream says.
			got = append(got, m[:strings.Index(m, "cancel_request")+len("cancel_request")])
		default:
			got = append(got, m)
		}
	}
	for _, s := range renewed {
		if s < due {
			t.Errorf("the new leader renewed %s before its cadence demanded, r = %s after its last credited send", due-s, r)
		}
	}
	// The cadence allows a renewal at due, or as Lead starts if that is
	// later, and one every r after it.
	allowed := 0
	if first := max(due, leading); ended >= first {
		allowed = 1 + int((ended-first)/r)
	}
	if len(renewed) > allowed {
		t.Errorf("the new leader renewed %d times in the handoff, its cadence allows %d", len(renewed), allowed)
	}
	slices.Sort(got)
	if want := []string{"/etcdserverpb.KV/Txn", "/etcdserverpb.Watch/Watch cancel_request"}; !slices.Equal(got, want) {
		t.Errorf("the new leader sent %q in the handoff, want %q: the start read and the wait's cancel", got, want)
	}
}

// Each term's guard watches over a stream of its own: Revoke closes it,
// so that a supervisor that campaigns term after term keeps no stream,
// and etcd no watches, of the terms it held.
func TestGuardStreamEndsWithTerm(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	cluster := etcdtest.Start(t, etcdtest.Options{})
	m := cluster.Member(0)
	open := func() int {
		return m.GRPCCount(t, "grpc_server_started_total", "Watch") - m.GRPCCount(t, "grpc_server_handled_total", "Watch")
	}
	f := newFixture(t, etcdtest.NewClient(t, cluster.Endpoints()...))
	before := open()
	until := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(safety)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("not within %s: %s", safety, what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for range 3 {
		a := f.lead()
		until("the term's guard opens its watch stream", func() bool { return open() > before })
		a.Revoke()
	}
	until("the terms' watch streams closed", func() bool { return open() == before })
}
