package campaign_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/etcdconn"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

func keepAliveStreams(t *testing.T, m *etcdtest.Member) int {
	t.Helper()
	return m.GRPCCount(t, "grpc_server_started_total", "LeaseKeepAlive")
}

// tally counts renewal attempts as the observer hears them.
type tally struct{ ok, failed atomic.Int64 }

func (n *tally) hear(_ time.Duration, err error) {
	if err == nil {
		n.ok.Add(1)
	} else {
		n.failed.Add(1)
	}
}

// atLeast waits until count reaches n, and fails if held delivers first.
func atLeast(t *testing.T, count *atomic.Int64, n int64, held <-chan error, what string) {
	t.Helper()
	deadline := time.After(safety)
	for count.Load() < n {
		select {
		case err := <-held:
			t.Fatalf("the term ended (%v) before %d %s", err, n, what)
		case <-deadline:
			t.Fatalf("%d %s within %s, want %d", count.Load(), what, safety, n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Every term on a client renews over one LeaseKeepAlive stream, the
// leader's and the waiter's alike, through faults that end the stream.
// Subtests other than one-stream, which counts every stream etcd sees
// opened, run in parallel once it is done.
func TestRenewals(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	cluster := etcdtest.Start(t, etcdtest.Options{})
	m := cluster.Member(0)

	t.Run("one-stream", func(t *testing.T) {
		f := newFixture(t, etcdtest.NewClient(t, cluster.Endpoints()...))
		f.ttl = campaign.MinTTL
		var n tally
		f.renewed = n.hear
		before := keepAliveStreams(t, m)
		a := f.lead()
		held := hold(a)
		f.waiting(t.Context(), 1)
		atLeast(t, &n.ok, 10, held, "renewals")
		if opened := keepAliveStreams(t, m) - before; opened != 1 {
			t.Errorf("etcd saw %d LeaseKeepAlive streams opened for %d renewals of two terms, want 1", opened, n.ok.Load())
		}
	})

	// etcd's connection reset under the stream: the next renewal opens
	// a new one, and the term goes on.
	t.Run("stream-reset", func(t *testing.T) {
		t.Parallel()
		p := newProxy(t, cluster)
		f := newFixture(t, etcdtest.NewClient(t, p.Addr()))
		f.ttl = 5 * time.Second
		var n tally
		f.renewed = n.hear
		a := f.lead()
		held := hold(a)
		atLeast(t, &n.ok, 2, held, "renewals")
		before := keepAliveStreams(t, m)
		p.Reset()
		p.Pass()
		ok := n.ok.Load()
		atLeast(t, &n.ok, ok+3, held, "renewals after the reset")
		if opened := keepAliveStreams(t, m) - before; opened < 1 {
			t.Errorf("renewals went on after the reset with no new stream")
		}
	})

	// A connection that carries nothing: no renewal counts, so the
	// deadline stands still. The attempts made meanwhile wait for as long
	// as their answer could still help, up to the fence point, instead of
	// failing at r as if a slow answer were none. Once etcd is reachable
	// again, renewals resume.
	t.Run("blackholed", func(t *testing.T) {
		t.Parallel()
		p := newProxy(t, cluster)
		f := newFixture(t, etcdtest.NewClient(t, p.Addr()))
		f.ttl = 5 * time.Second
		var n tally
		f.renewed = n.hear
		a := f.lead()
		r := campaign.DefaultRenewInterval(a.TTL)
		held := hold(a)
		atLeast(t, &n.ok, 2, held, "renewals")
		p.Blackhole()
		defer p.Pass()
		ok, failed, d := n.ok.Load(), n.failed.Load(), a.Deadline()
		// The fence point is d - K - m, over 3s after the last renewal;
		// 3r is well short of it.
		time.Sleep(3 * r)
		if n.ok.Load() != ok || a.Deadline() != d {
			t.Fatalf("while blackholed: %d renewals counted, deadline moved by %s", n.ok.Load()-ok, a.Deadline()-d)
		}
		if n.failed.Load() != failed {
			t.Errorf("%d renewals failed in 3r while blackholed, want none before the fence point: attempts end at r",
				n.failed.Load()-failed)
		}
		p.Pass()
		atLeast(t, &n.ok, ok+1, held, "renewals after the blackhole")
		if a.Deadline() <= d {
			t.Errorf("a renewal counted after the blackhole but the deadline did not move")
		}
	})

	// A round trip longer than the renewal interval, with the fence point
	// still ahead of it: every answer arrives in time to count, so no
	// attempt fails and the deadline keeps moving. Attempts bounded by r
	// would all fail here, and the fence would fire while etcd renews.
	t.Run("slow-link", func(t *testing.T) {
		t.Parallel()
		p := newProxy(t, cluster)
		f := newFixture(t, etcdtest.NewClient(t, p.Addr()))
		f.ttl = 3 * time.Second // T - K - m - r = 1.7s, above the round trip
		var n tally
		f.renewed = n.hear
		a := f.lead()
		held := hold(a)
		atLeast(t, &n.ok, 2, held, "renewals")
		p.Delay(500 * time.Millisecond) // a round trip of 1s, over 3r
		defer p.Delay(0)
		ok, failed, d := n.ok.Load(), n.failed.Load(), a.Deadline()
		atLeast(t, &n.ok, ok+10, held, "renewals behind the slow link")
		if n.failed.Load() != failed {
			t.Errorf("%d renewals failed behind a round trip the fence leaves room for", n.failed.Load()-failed)
		}
		if a.Deadline() <= d {
			t.Errorf("renewals counted behind the slow link but the deadline did not move")
		}
		if a.Deadline()-(750+250)*time.Millisecond <= bootclock.Now() { // the fixture's K + m
			t.Errorf("the fence point passed behind the slow link")
		}
	})

	// Only etcd saying the lease is gone ends a term from the renewals;
	// the term here has no keys, so no guard to end it first.
	t.Run("lease-revoked", func(t *testing.T) {
		t.Parallel()
		cli := etcdtest.NewClient(t, cluster.Endpoints()...)
		f := newFixture(t, cli)
		f.ttl = campaign.MinTTL
		var n tally
		f.renewed = n.hear
		a, err := f.campaigner(false).Grant(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Revoke)
		held := hold(a)
		atLeast(t, &n.ok, 1, held, "renewals")
		if _, err := cli.Revoke(t.Context(), a.Lease); err != nil {
			t.Fatal(err)
		}
		if err := awaitErr(t, held); !errors.Is(err, campaign.ErrLeaseLost) {
			t.Fatalf("Lead after the lease was revoked = %v, want ErrLeaseLost", err)
		}
	})

	// The deadline is the send time of the renewal etcd answered plus the
	// TTL, on the campaigner's clock, and never moves back. The clock jumps
	// each time an answer arrives, so a deadline counted from the answer
	// (later than etcd's own expiry) cannot pass for one counted from the
	// send.
	t.Run("deadline-from-send-time", func(t *testing.T) {
		t.Parallel()
		const jump = 50 * time.Second
		var clock atomic.Int64
		clock.Store(int64(100 * time.Second))
		cfg := etcdtest.ClientConfig(cluster.Endpoints()...)
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainStreamInterceptor(
			func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				cs, err := streamer(ctx, desc, cc, method, opts...)
				if err != nil || method != "/etcdserverpb.Lease/LeaseKeepAlive" {
					return cs, err
				}
				return answerClock{cs, &clock, jump}, nil
			}))
		cli, err := clientv3.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.Close() })
		f := newFixture(t, cli)
		c, err := campaign.New(campaign.Config{
			Client: f.cli, Layout: f.l, ID: "c", Timing: campaign.Timing{TTL: 10 * time.Second, KillTimeout: 750 * time.Millisecond, FenceMargin: 250 * time.Millisecond}, RequestTimeout: 5 * time.Second,
			Now: func() time.Duration { return time.Duration(clock.Load()) },
		})
		if err != nil {
			t.Fatal(err)
		}
		a, err := c.Grant(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Revoke)
		if d := a.Deadline(); d != 110*time.Second {
			t.Fatalf("deadline after a grant sent at 100s with TTL 10s = %s", d)
		}
		// Sent at 200s (answered at 250s), then at 150s (answered at 200s):
		// the second must not move the deadline back.
		for _, c := range []struct{ sent, want time.Duration }{{200 * time.Second, 210 * time.Second}, {150 * time.Second, 210 * time.Second}} {
			clock.Store(int64(c.sent))
			if err := a.RenewOnce(t.Context(), 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(clock.Load()); got != c.sent+jump {
				t.Fatalf("clock %s after the renewal sent at %s: the answer was not seen", got, c.sent)
			}
			if d := a.Deadline(); d != c.want {
				t.Errorf("deadline after a renewal sent at %s and answered at %s = %s, want %s", c.sent, c.sent+jump, d, c.want)
			}
		}
	})

	// Lead hands the keeper a deadline about every other renewal at this
	// TTL, each one a deadline the term held, each later than the last.
	t.Run("keeper-told-less-often", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, etcdtest.NewClient(t, cluster.Endpoints()...))
		var n tally
		// K + m as etcdlead run sets them for a TTL of 2s: a quarter of
		// the outage tolerance is then a little over r.
		c, err := campaign.New(campaign.Config{Client: f.cli, Layout: f.l, ID: "c",
			Timing: campaign.Timing{TTL: campaign.MinTTL, KillTimeout: 500 * time.Millisecond, FenceMargin: 250 * time.Millisecond}, RequestTimeout: 5 * time.Second, Now: bootclock.Now, Observer: renewObserver(n.hear)})
		if err != nil {
			t.Fatal(err)
		}
		a, err := c.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Revoke)
		var told []time.Duration
		hctx, cancel := context.WithCancel(t.Context())
		held := make(chan error, 1)
		go func() { held <- a.Lead(hctx, func(d time.Duration) { told = append(told, d) }) }()
		atLeast(t, &n.ok, 12, held, "renewals")
		cancel()
		<-held
		renewed := int(n.ok.Load())
		// About every other one; a renewal delayed by the scheduler can
		// make one step long enough on its own.
		if len(told) == 0 || len(told) > renewed*2/3+1 {
			t.Errorf("%d deadlines handed over for %d renewals, want at least one and about every other", len(told), renewed)
		}
		// Too rarely would fence a healthy leader's child: the keeper's
		// deadline must keep up with the term's, a step at a time.
		if len(told) < renewed/3 {
			t.Errorf("%d deadlines handed over for %d renewals, want about every other: the keeper's fence would fire while the term holds", len(told), renewed)
		}
		for i, d := range told {
			if i > 0 && d <= told[i-1] {
				t.Errorf("deadline %s handed over after %s", d, told[i-1])
			}
		}
		if last := told[len(told)-1]; last > a.Deadline() {
			t.Errorf("handed over %s, later than the term's deadline %s", last, a.Deadline())
		}
	})
}

// answerClock moves a test's clock on by jump whenever an answer arrives
// on its stream.
type answerClock struct {
	grpc.ClientStream
	clock *atomic.Int64
	jump  time.Duration
}

func (a answerClock) RecvMsg(m any) error {
	err := a.ClientStream.RecvMsg(m)
	if err == nil {
		a.clock.Add(int64(a.jump))
	}
	return err
}

// renewObserver hears renewals only.
type renewObserver func(time.Duration, error)

func (o renewObserver) Renewed(latency time.Duration, err error) { o(latency, err) }
func (renewObserver) BarrierWait()                               {}
func (renewObserver) Paused()                                    {}
func (renewObserver) Queued(string, int)                         {}
func (renewObserver) Front(string)                               {}

// With auth on, renewals carry the client's token on their one stream: one
// login for all of them.
func TestRenewalsWithAuth(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	const password = "alice-Pw-9q#Z!k2"
	cluster := etcdtest.Start(t, etcdtest.Options{})
	m := cluster.Member(0)
	root := cluster.Client(t)
	ctx := t.Context()
	rw := clientv3.PermissionType(clientv3.PermReadWrite)
	l, err := campaign.NewLayout("etcdlead/", "reports")
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { _, err := root.UserAdd(ctx, "root", "root-Pw-7f3a"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.RoleAdd(ctx, "reports"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "reports", "etcdlead/reports", clientv3.GetPrefixRangeEnd("etcdlead/reports"), rw)
			return err
		},
		func() error { _, err := root.UserAdd(ctx, "alice", password); return err },
		func() error { _, err := root.UserGrantRole(ctx, "alice", "reports"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("auth setup: %v", err)
		}
	}
	cli, err := etcdconn.New(etcdconn.Config{Endpoints: cluster.Endpoints(), DialTimeout: 5 * time.Second,
		User: "alice", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	var n tally
	c, err := campaign.New(campaign.Config{Client: cli, Layout: l, ID: "alice",
		Timing: campaign.Timing{TTL: campaign.MinTTL, KillTimeout: 750 * time.Millisecond, FenceMargin: 250 * time.Millisecond}, RequestTimeout: 5 * time.Second, Now: bootclock.Now, Observer: renewObserver(n.hear)})
	if err != nil {
		t.Fatal(err)
	}
	logins, streams := m.GRPCCount(t, "grpc_server_handled_total", "Authenticate"), keepAliveStreams(t, m)
	a, err := c.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Revoke)
	held := hold(a)
	atLeast(t, &n.ok, 10, held, "renewals")
	if got := m.GRPCCount(t, "grpc_server_handled_total", "Authenticate") - logins; got != 1 {
		t.Errorf("%d logins for a campaign and %d renewals, want 1", got, n.ok.Load())
	}
	if got := keepAliveStreams(t, m) - streams; got != 1 {
		t.Errorf("%d LeaseKeepAlive streams opened, want 1", got)
	}
}

// A renewal interval given by hand (Config.RenewInterval, --renew-interval)
// is the leader's cadence: it renews that seldom, and no more often.
// Sending again to another member after a quiet stream does not follow it:
// a leader that renews seldom moves off a frozen member as soon as one
// with the default cadence, long before its fence point.
func TestRenewIntervalGiven(t *testing.T) {
	skipIfShort(t)
	t.Parallel()

	// At TTL 15s the default cadence is 1s: 9 or 10 renewals in the
	// window below, against 2 at 4s, and 3 if one answer took longer than
	// quietAfter, 1s, and was sent again.
	t.Run("cadence", func(t *testing.T) {
		t.Parallel()
		cluster := etcdtest.Start(t, etcdtest.Options{})
		f := newFixture(t, etcdtest.NewClient(t, cluster.Endpoints()...))
		f.ttl, f.renew = 15*time.Second, 4*time.Second
		var n tally
		f.renewed = n.hear
		a := f.lead()
		held := hold(a)
		atLeast(t, &n.ok, 1, held, "renewals")
		ok := n.ok.Load()
		const window = 9 * time.Second
		time.Sleep(window) // the measure of a cadence, not a wait for an event
		got := n.ok.Load() - ok
		if most := int64(window/f.renew) + 1; got > most {
			t.Errorf("%d renewals in %s at a renewal interval of %s, want at most %d", got, window, f.renew, most)
		}
		if got < 1 {
			t.Errorf("no renewal in %s at a renewal interval of %s", window, f.renew)
		}
		if n.failed.Load() != 0 {
			t.Errorf("%d renewals failed", n.failed.Load())
		}
	})

	// The member the leader's renewal stream is on freezes just after a
	// renewal. The next attempt, r later, goes to that stream, which has
	// nothing unanswered yet; the one after it comes only 2r after the
	// last credited send, past the fence point (T - K - m = 9s, 2r = 10s).
	// Sent again once unanswered for quietAfter (1s), to another member,
	// it renews about r + 1s after the freeze.
	t.Run("frozen-member", func(t *testing.T) {
		t.Parallel()
		cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
		f := newFixture(t, etcdtest.NewClient(t, cluster.Endpoints()...))
		f.ttl, f.renew = 10*time.Second, 5*time.Second
		var n tally
		f.renewed = n.hear
		a := f.lead()
		held := hold(a)
		atLeast(t, &n.ok, 1, held, "renewals")
		stream := -1
		for i, m := range cluster.Members() {
			if m.OpenStreams(t, "LeaseKeepAlive") > 0 {
				stream = i
			}
		}
		if stream < 0 {
			t.Fatal("no member holds the leader's renewal stream")
		}
		ok := n.ok.Load()
		fencePoint := a.Deadline() - (750+250)*time.Millisecond // the fixture's K + m
		freezeFollower(t, cluster, stream)
		atLeast(t, &n.ok, ok+1, held, "renewals after the freeze")
		if now := bootclock.Now(); now >= fencePoint {
			t.Errorf("the first renewal after the freeze came %s past the fence point", now-fencePoint)
		}
	})
}
