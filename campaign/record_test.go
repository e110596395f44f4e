package campaign_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// holdLine is what a candidate logs when it holds an ended term's record.
const holdLine = "waiting out its TTL before taking its record away"

// movingLeader is a leader A, holding, on one member of a three-member
// cluster: the member the raft leadership moves to with move, so that
// every answer after the move names the new raft term. Its candidates use
// cli, on the same member.
type movingLeader struct {
	cluster *etcdtest.Cluster
	cli     *clientv3.Client // of the member A uses
	to      int              // that member
	fa      *fixture         // A's
	a       *campaign.Term
	held    <-chan error // A's Lead
	stop    func()       // ends A's Lead, as A's supervisor's death does
}

// newMovingLeader makes A lead, at TTL ttl.
func newMovingLeader(t *testing.T, cluster *etcdtest.Cluster, ttl time.Duration) *movingLeader {
	t.Helper()
	m := &movingLeader{cluster: cluster, to: (cluster.RaftLeader(t) + 1) % 3}
	m.cli = etcdtest.NewClient(t, cluster.Member(m.to).ClientAddr())
	m.fa = newFixture(t, etcdtest.NewClient(t, cluster.Member(m.to).ClientAddr()))
	m.fa.ttl = ttl
	m.a = m.fa.lead()
	ctx, cancel := context.WithCancel(context.Background())
	held := make(chan error, 1)
	go func() { held <- m.a.Lead(ctx, func(time.Duration) {}) }()
	m.held, m.stop = held, cancel
	t.Cleanup(cancel)
	return m
}

// candidate is a fixture for candidates of A's election at TTL ttl, each
// with a fresh Campaigner (a fresh etcdlead: it remembers nothing), on
// A's member, logging to log.
func (m *movingLeader) candidate(t *testing.T, ttl time.Duration, log *testLog) *fixture {
	f := newFixture(t, m.cli)
	f.l, f.ttl, f.n, f.log = m.fa.l, ttl, 100+m.fa.n, log
	m.fa.n += 10 // ids apart
	return f
}

// move hands the raft leadership to the member A uses: a new raft term,
// as after a raft leader change that etcd made itself.
func (m *movingLeader) move(t *testing.T) { m.cluster.MoveLeader(t, m.to) }

// sweep revokes A's lease, as a resumed raft leader's sweep does after the
// move, and returns when it was sent on the boot clock. A's child would
// run on until A's deadline, as if A's supervisor were frozen: A is not
// told to end.
func (m *movingLeader) sweep(t *testing.T) time.Duration {
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

// The promise at the campaign's level: a term's record outlives its lease
// until the term ends it or a successor knows its child gone. After a raft
// leader change since A's grant, a lease that ends may have been swept
// while A's child runs, up to A's deadline, and a candidate that never
// saw A (a restarted etcdlead, a cron run) must still wait that out; A's
// own end, or a lease's expiry with no raft leader change, is followed at
// once.
func TestEndedTermRecord(t *testing.T) {
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})

	t.Run("swept-is-waited-out-by-a-fresh-candidate", func(t *testing.T) {
		m := newMovingLeader(t, cluster, campaign.MinTTL)
		m.move(t)
		at := m.sweep(t)
		log := newTestLog()
		d := m.candidate(t, campaign.MinTTL, log).lead()
		// A's child may run until A's deadline: at most A's TTL after the
		// sweep, as every renewal A was credited was sent before it.
		if now := bootclock.Now(); now < at+m.a.TTL {
			t.Errorf("D leads %s after A's lease was swept, before A's TTL of %s had passed", now-at, m.a.TTL)
		}
		if !log.has(holdLine) {
			t.Errorf("D did not say it waits out A:\n%s", log)
		}
		d.Revoke()
	})

	t.Run("no-wait-waits-out-an-ended-term", func(t *testing.T) {
		m := newMovingLeader(t, cluster, campaign.MinTTL)
		m.move(t)
		at := m.sweep(t)
		c := m.candidate(t, campaign.MinTTL, newTestLog()).campaigner(true)
		d, err := c.Campaign(t.Context())
		if err != nil {
			t.Fatalf("a --no-wait campaign behind an ended term: %v, want it to wait the term out and lead", err)
		}
		defer d.Revoke()
		if now := bootclock.Now(); now < at+m.a.TTL {
			t.Errorf("D leads %s after A's lease was swept, before A's TTL of %s had passed", now-at, m.a.TTL)
		}
	})

	// pause returns only once every term older than the pause has ended:
	// a swept lease is no proof, its record is.
	t.Run("pause-waits-out-an-ended-term", func(t *testing.T) {
		m := newMovingLeader(t, cluster, campaign.MinTTL)
		m.move(t)
		at := m.sweep(t)
		rev, err := campaign.Pause(t.Context(), m.cli, m.fa.l, campaign.PauseRecord{By: "test"})
		if err != nil {
			t.Fatal(err)
		}
		defer campaign.Resume(context.Background(), m.cli, m.fa.l)
		ctx, cancel := context.WithTimeout(t.Context(), safety)
		defer cancel()
		if left, err := campaign.WaitIdle(ctx, m.cli, m.fa.l, rev); err != nil || len(left) > 0 {
			t.Fatalf("WaitIdle = %v, %v", left, err)
		}
		if now := bootclock.Now(); now < at+m.a.TTL {
			t.Errorf("pause returned %s after A's lease was swept, before A's TTL of %s had passed", now-at, m.a.TTL)
		}
	})

	t.Run("no-wait-gives-up-on-a-live-term", func(t *testing.T) {
		m := newMovingLeader(t, cluster, campaign.MinTTL)
		c := m.candidate(t, campaign.MinTTL, newTestLog()).campaigner(true)
		if _, err := c.Campaign(t.Context()); !errors.Is(err, campaign.ErrNotLeader) {
			t.Fatalf("a --no-wait campaign behind a live leader: %v, want ErrNotLeader", err)
		}
	})

	t.Run("own-end-is-followed-at-once", func(t *testing.T) {
		m := newMovingLeader(t, cluster, campaign.MinTTL)
		log := newTestLog()
		fb := m.candidate(t, campaign.MinTTL, log)
		b := fb.waiting(t.Context(), 1)
		m.move(t)
		m.a.Revoke()
		fb.await(b).Revoke()
		if log.has(holdLine) {
			t.Errorf("B waited out A's own end:\n%s", log)
		}
	})

	t.Run("expired-is-followed-at-once", func(t *testing.T) {
		m := newMovingLeader(t, cluster, campaign.MinTTL)
		log := newTestLog()
		fb := m.candidate(t, campaign.MinTTL, log)
		b := fb.waiting(t.Context(), 1)
		// A's supervisor dies: its renewals stop and nothing ends its term.
		m.stop()
		awaitErr(t, m.held)
		tb := fb.await(b)
		if now := bootclock.Now(); now < m.a.Deadline() {
			t.Errorf("B leads %s before A's deadline", m.a.Deadline()-now)
		}
		if log.has(holdLine) {
			t.Errorf("B waited out A's expiry with no raft leader change since A's grant:\n%s", log)
		}
		tb.Revoke()
	})

	// A swept leader whose supervisor runs hears that its keys went, stops
	// its child and ends its term: its record goes then, and the hold of
	// the candidate behind it with it.
	t.Run("an-ended-term-that-ends-ends-the-hold", func(t *testing.T) {
		m := newMovingLeader(t, cluster, 6*time.Second)
		log := newTestLog()
		fb := m.candidate(t, campaign.MinTTL, log)
		b := fb.waiting(t.Context(), 1)
		m.move(t)
		at := m.sweep(t)
		log.waitFor(t, 0, nil, holdLine)
		m.a.Revoke()
		fb.await(b).Revoke()
		if now := bootclock.Now(); now >= at+m.a.TTL {
			t.Errorf("B leads %s after the sweep: it held A's record for A's TTL although A ended its term", now-at)
		}
	})

	// A leader whose record is deleted by hand ends its term: a newcomer
	// finds nothing older than itself then, and would start beside its
	// child.
	t.Run("own-record-deleted-ends-the-term", func(t *testing.T) {
		m := newMovingLeader(t, cluster, campaign.MinTTL)
		if _, err := m.cli.Delete(t.Context(), m.a.Record); err != nil {
			t.Fatal(err)
		}
		fromWatch(t, awaitErr(t, m.held), campaign.ErrKeyDeleted)
	})

	// A record that a read shows without its term's keys, whose lease
	// still lives (both keys deleted by hand), is waited for until the
	// lease ends: a deleted key does not end a child.
	t.Run("keys-deleted-by-hand-lease-lives", func(t *testing.T) {
		m := newMovingLeader(t, cluster, campaign.MinTTL)
		fb := m.candidate(t, campaign.MinTTL, newTestLog())
		b := fb.waiting(t.Context(), 1)
		if _, err := m.cli.Txn(t.Context()).Then(clientv3.OpDelete(m.a.Key), clientv3.OpDelete(m.a.Sentinel)).Commit(); err != nil {
			t.Fatal(err)
		}
		fb.waitsOnLease(b)
		still(t, b, "B while A's lease lives")
		if err := awaitErr(t, m.held); !errors.Is(err, campaign.ErrKeyDeleted) {
			t.Fatalf("A's Lead = %v, want its keys gone", err)
		}
		m.a.Revoke()
		fb.await(b).Revoke()
	})
}
