package campaign_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// holdLine is what a candidate logs when it waits out an early end.
const holdLine = "waiting out its TTL before starting"

// movingLeader is a leader A, holding, at the shortest TTL, on one member
// of a three-member cluster: the member the raft leadership moves to with
// move, so that every answer A gets after the move names the new raft term.
// Its candidates use cli, on the same member.
type movingLeader struct {
	cluster *etcdtest.Cluster
	cli     *clientv3.Client // of the member A uses
	to      int              // that member
	fa      *fixture         // A's
	a       *campaign.Term
	held    <-chan error // A's Lead
	// moved is when move returned (Unix ns), and renewed hears each
	// renewal of A's that was sent after that.
	moved   atomic.Int64
	renewed chan struct{}
}

// newMovingLeader readies A's fixture; lead makes A lead.
func newMovingLeader(t *testing.T, cluster *etcdtest.Cluster) *movingLeader {
	t.Helper()
	m := &movingLeader{cluster: cluster, to: (cluster.RaftLeader(t) + 1) % 3, renewed: make(chan struct{}, 1)}
	m.cli = etcdtest.NewClient(t, cluster.Member(m.to).ClientAddr())
	m.fa = newFixture(t, etcdtest.NewClient(t, cluster.Member(m.to).ClientAddr()))
	m.fa.ttl = campaign.MinTTL
	m.fa.renewed = func(latency time.Duration, err error) {
		if at := m.moved.Load(); err == nil && at > 0 && time.Now().Add(-latency).UnixNano() > at {
			select {
			case m.renewed <- struct{}{}:
			default:
			}
		}
	}
	return m
}

func (m *movingLeader) lead() {
	m.a = m.fa.lead()
	m.held = hold(m.a)
}

// move hands the raft leadership to the member A uses: a new raft term,
// as after a raft leader change that etcd made itself.
func (m *movingLeader) move(t *testing.T) {
	m.cluster.MoveLeader(t, m.to)
	m.moved.Store(time.Now().UnixNano())
}

// revoke revokes A's lease as an operator, or a resumed raft leader's
// sweep, would, and returns when it was sent on the boot clock.
func (m *movingLeader) revoke(t *testing.T) time.Duration {
	t.Helper()
	at := bootclock.Now()
	if _, err := m.cli.Revoke(t.Context(), m.a.Lease); err != nil {
		t.Fatal(err)
	}
	if err := awaitErr(t, m.held); !errors.Is(err, campaign.ErrKeyDeleted) && !errors.Is(err, campaign.ErrLeaseLost) {
		t.Fatalf("A's Lead = %v, want its keys or lease gone", err)
	}
	return at
}

// earlyPair is a moving leader A and a candidate B next behind it. B's log
// is kept.
type earlyPair struct {
	*movingLeader
	fb    *fixture
	b     <-chan result
	stopB context.CancelFunc // ends B's campaign
	log   *testLog           // B's
}

func newEarlyPair(t *testing.T, cluster *etcdtest.Cluster) *earlyPair {
	t.Helper()
	p := &earlyPair{movingLeader: newMovingLeader(t, cluster), log: newTestLog()}
	p.lead()
	p.fb = newFixture(t, p.cli)
	p.fb.ttl, p.fb.n, p.fb.log = campaign.MinTTL, 1, p.log // ids apart
	ctx, cancel := context.WithCancel(t.Context())
	p.stopB = cancel
	p.b = p.fb.waiting(ctx, 1)
	p.fb.next(p.b, newest(t, p.cli, p.fb.l))
	return p
}

// The promise at the campaign's level: a lease that ends early after a raft
// leader change, without its term saying that its child is gone, may have
// been taken by a resumed raft leader's sweep while that child runs, up to
// the term's deadline. The candidate behind it waits out that term's TTL
// from the end; one that ends gracefully, or with no raft leader change
// since its grant, it follows at once.
func TestEarlyEndAfterRaftLeaderChange(t *testing.T) {
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})

	t.Run("revoked-after-a-change-is-waited-out", func(t *testing.T) {
		p := newEarlyPair(t, cluster)
		p.move(t)
		at := p.revoke(t)
		tb := p.fb.await(p.b)
		// A's child may run until A's deadline: at most A's TTL after the
		// revoke, as every renewal A was credited was sent before it.
		if now := bootclock.Now(); now < at+campaign.MinTTL {
			t.Errorf("B leads %s after A's lease was revoked, before A's TTL of %s had passed", now-at, campaign.MinTTL)
		}
		if !p.log.has(holdLine) {
			t.Errorf("B did not say it waits out the early end:\n%s", p.log)
		}
		tb.Revoke()
	})

	t.Run("released-after-a-change-is-followed-at-once", func(t *testing.T) {
		p := newEarlyPair(t, cluster)
		p.move(t)
		// A learns of the new raft term from a renewal sent after the move.
		select {
		case <-p.renewed:
		case <-time.After(safety):
			t.Fatal("A did not renew after the move")
		}
		// The value the sentinel had when A's revoke deleted it.
		wch := p.cli.Watch(t.Context(), p.a.Sentinel, clientv3.WithRev(p.a.Rev+1), clientv3.WithPrevKV())
		p.a.Revoke()
		tb := p.fb.await(p.b)
		if p.log.has(holdLine) {
			t.Errorf("B waited out the graceful end of A:\n%s", p.log)
		}
		if ev := firstDelete(t, wch); !strings.Contains(string(ev.PrevKv.Value), " released") {
			t.Errorf("A's sentinel %q did not say released before its revoke", ev.PrevKv.Value)
		}
		tb.Revoke()
	})

	// B waits out A's early end, and ends meanwhile: its revoke must not
	// let C, behind it, start before A's TTL has passed either.
	t.Run("a-hold-outlives-the-term-that-holds", func(t *testing.T) {
		p := newEarlyPair(t, cluster)
		fc := newFixture(t, p.cli)
		fc.l, fc.ttl, fc.n = p.fb.l, campaign.MinTTL, 2
		c := fc.waiting(t.Context(), 2)
		p.move(t)
		at := p.revoke(t)
		p.log.waitFor(t, 0, nil, holdLine)
		p.stopB()
		if r := <-p.b; !errors.Is(r.err, campaign.ErrNotLeader) {
			t.Fatalf("B's campaign = %v, want ErrNotLeader", r.err)
		}
		tc := fc.await(c)
		if now := bootclock.Now(); now < at+campaign.MinTTL {
			t.Errorf("C leads %s after A's lease was revoked, before A's TTL of %s had passed", now-at, campaign.MinTTL)
		}
		tc.Revoke()
	})

	// B sees W, the term ahead, end early while A, further ahead, still
	// stands, so B waits on; B ends then: its revoke must wait out W's
	// TTL all the same, or C, behind it, starts as soon as A goes.
	t.Run("a-hold-outlives-a-wait-that-goes-on", func(t *testing.T) {
		p := newEarlyPair(t, cluster) // A leads, "B" is W here
		w := newest(t, p.cli, p.fb.l)
		resp, err := p.cli.Get(t.Context(), w)
		if err != nil || len(resp.Kvs) == 0 {
			t.Fatalf("W's queue key: %v", err)
		}
		blog := newTestLog()
		fb := newFixture(t, p.cli)
		fb.l, fb.ttl, fb.n, fb.log = p.fb.l, campaign.MinTTL, 2, blog
		bctx, stopB := context.WithCancel(t.Context())
		b := fb.waiting(bctx, 2)
		fc := newFixture(t, p.cli)
		fc.l, fc.ttl, fc.n = p.fb.l, campaign.MinTTL, 3
		c := fc.waiting(t.Context(), 3)
		p.move(t)
		at := bootclock.Now()
		if _, err := p.cli.Revoke(t.Context(), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
			t.Fatal(err)
		}
		i := blog.waitFor(t, 0, nil, "predecessor moved")
		blog.waitFor(t, i, nil, "start read answered")
		stopB()
		if r := <-b; !errors.Is(r.err, campaign.ErrNotLeader) {
			t.Fatalf("B's campaign = %v, want ErrNotLeader", r.err)
		}
		// A ends gracefully, having learnt of the new raft term.
		select {
		case <-p.renewed:
		case <-time.After(safety):
			t.Fatal("A did not renew after the move")
		}
		p.a.Revoke()
		tc := fc.await(c)
		if now := bootclock.Now(); now < at+campaign.MinTTL {
			t.Errorf("C leads %s after W's lease was revoked, before W's TTL of %s had passed; B:\n%s", now-at, campaign.MinTTL, blog)
		}
		tc.Revoke()
	})

	t.Run("revoked-without-a-change-is-followed-at-once", func(t *testing.T) {
		p := newEarlyPair(t, cluster)
		p.revoke(t)
		tb := p.fb.await(p.b)
		if p.log.has(holdLine) {
			t.Errorf("B waited out an end with no raft leader change since A's grant:\n%s", p.log)
		}
		tb.Revoke()
	})
}

// firstDelete is the first delete event that wch delivers.
func firstDelete(t *testing.T, wch clientv3.WatchChan) *clientv3.Event {
	t.Helper()
	deadline := time.After(safety)
	for {
		select {
		case resp := <-wch:
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					return ev
				}
			}
		case <-deadline:
			t.Fatal("no delete of the sentinel")
		}
	}
}

// A waiter's own keys and the term ahead's sentinel deleted in one
// revision, as a sweep (or an operator) may: the wake-up's start read finds
// its own keys gone, and the campaign ends, whether or not its guard has
// heard of it yet. Either way the early end is noted, and the candidate
// sits out a TTL before it campaigns again: the term ahead's child may
// still run. The guard is held at its log line until the revoke begins,
// so that the start read comes first, as it did in an e2e run.
func TestEarlyEndFoundByTheStartRead(t *testing.T) {
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 1})
	cli := etcdtest.NewClient(t, cluster.Member(0).ClientAddr())
	fa := newFixture(t, cli)
	fa.ttl = campaign.MinTTL
	a := fa.lead()
	hold(a)
	revoking := make(chan struct{})
	var once sync.Once
	blog := newTestLog()
	blog.stall = func(msg string) {
		switch msg {
		case "key deleted":
			select {
			case <-revoking:
			case <-time.After(safety):
			}
		case "revoking lease":
			once.Do(func() { close(revoking) })
		}
	}
	fb := newFixture(t, cli)
	fb.l, fb.ttl, fb.n, fb.log = fa.l, campaign.MinTTL, 1, blog
	b := fb.campaigner(false)
	out := make(chan result, 1)
	go func() {
		tb, err := b.Campaign(t.Context())
		out <- result{tb, err}
	}()
	// B is the only candidate of its fixture: the first it reports next in
	// line is B, waiting behind A.
	var bKey string
	select {
	case bKey = <-fb.front:
	case r := <-out:
		t.Fatalf("B stopped waiting (err %v)", r.err)
	case <-time.After(safety):
		t.Fatal("B did not queue")
	}
	resp, err := cli.Get(t.Context(), bKey)
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("B's queue key: %v", err)
	}
	bLease := clientv3.LeaseID(resp.Kvs[0].Lease)
	if _, err := cli.Txn(t.Context()).Then(
		clientv3.OpDelete(a.Sentinel), clientv3.OpDelete(a.Key),
		clientv3.OpDelete(fb.l.SentinelKey(bLease)), clientv3.OpDelete(bKey)).Commit(); err != nil {
		t.Fatal(err)
	}
	if r := <-out; !errors.Is(r.err, campaign.ErrKeyDeleted) {
		t.Fatalf("B's campaign = %v, want its keys gone", r.err)
	}
	start := bootclock.Now()
	ctx, cancel := context.WithTimeout(t.Context(), campaign.MinTTL/2)
	defer cancel()
	if tb, err := b.Campaign(ctx); err == nil {
		tb.Revoke()
		t.Fatalf("B led again %s after its keys were deleted, while A's child may run:\n%s", bootclock.Now()-start, blog)
	}
}
