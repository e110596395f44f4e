package campaign_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

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
		skipIfShort(t)
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
		skipIfShort(t)
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
		skipIfShort(t)
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

// A candidate that campaigns again while its member has no raft leader
// (its peers frozen) neither starts nor hangs past its context: every
// request and watch of a campaign requires a leader, so none waits on the
// leaderless member for ever, and no answer of a member without a leader
// feeds the raft term its record names. Once the member has a leader
// again, it leads.
func TestCampaignAgainWhileMemberLeaderless(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
	cli := etcdtest.NewClient(t, cluster.Member(0).ClientAddr())
	f := newFixture(t, cli)
	f.ttl = campaign.MinTTL
	c := f.campaigner(false)
	a, err := c.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	a.Revoke()
	cluster.Member(1).Freeze(t)
	cluster.Member(2).Freeze(t)
	bound := 3 * campaign.MinTTL
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	began := time.Now()
	done := make(chan result, 1)
	go func() {
		tb, err := c.Campaign(ctx)
		done <- result{tb, err}
	}()
	select {
	case r := <-done:
		if r.term != nil {
			r.term.Revoke()
			t.Fatal("a candidate led through a member without a raft leader")
		}
		t.Logf("campaign through the leaderless member: %v after %s", r.err, time.Since(began).Round(time.Millisecond))
	case <-time.After(bound + safety):
		t.Fatalf("the campaign through a leaderless member did not return %s after its context ended", safety)
	}
	cluster.Member(1).Thaw(t)
	cluster.Member(2).Thaw(t)
	b := f.lead()
	rec, err := cli.Get(t.Context(), b.Record)
	if err != nil || len(rec.Kvs) != 1 {
		t.Fatalf("B's record: %v", err)
	}
	r, ok := campaign.ParseRecord(rec.Kvs[0].Value)
	status, err := cli.Status(t.Context(), cluster.Member(0).ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	if !ok || r.RaftTerm == 0 || r.RaftTerm > status.RaftTerm {
		t.Errorf("B's record names raft term %d (%v), etcd is in %d", r.RaftTerm, ok, status.RaftTerm)
	}
	b.Revoke()
}

// Every request and stream of a campaign, and of a term's end, requires a
// raft leader at the member (clientv3.WithRequireLeader): etcd refuses it,
// or ends the stream, where the member has none, and the campaign moves on
// or reads again. Without it a watch on a member cut off from its peers
// waits for ever, unasked (its stream is not the term's, which the stall
// detector asks after), and an answer from a member without a leader could
// name the raft term a record is judged by. Here a fresh candidate clears
// a swept term's record, leads, renews, and hands over to a waiter, whose
// term ends too; then a candidate campaigns twice.
func TestEveryCampaignRequestRequiresALeader(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
	m := newMovingLeader(t, cluster, campaign.MinTTL)
	var mu sync.Mutex
	var without []string
	note := func(ctx context.Context, what string) {
		md, _ := metadata.FromOutgoingContext(ctx)
		if len(md.Get(rpctypes.MetadataRequireLeaderKey)) == 0 {
			mu.Lock()
			without = append(without, what)
			mu.Unlock()
		}
	}
	cfg := etcdtest.ClientConfig(cluster.Endpoints()...)
	cfg.DialOptions = append(cfg.DialOptions,
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			note(ctx, method)
			return invoke(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			note(ctx, method+" (stream)")
			return streamer(ctx, desc, cc, method, opts...)
		}))
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	m.move(t)
	m.sweep(t)
	f := m.candidate(t, campaign.MinTTL, newTestLog())
	f.cli = cli
	d := f.lead()
	dheld := hold(d)
	e := f.start(t.Context())
	// The fixture's own reads go through A's client: only the campaign's
	// are looked at.
	for deadline := time.Now().Add(safety); newest(t, m.cli, f.l) == d.Key; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("E not queued")
		}
	}
	f.next(e, newest(t, m.cli, f.l))
	d.Revoke()
	awaitErr(t, dheld)
	f.await(e).Revoke()
	// One candidate campaigns again, after a term of its own.
	c := f.campaigner(false)
	for range 2 {
		tc, err := c.Campaign(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		tc.Revoke()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(without) > 0 {
		t.Errorf("sent without requiring a leader: %q", without)
	}
}

// A campaign whose lease ID names a record that is already there (etcd
// gave the ID out again: a member restarted after its clock stepped back,
// two members whose IDs share their low 16 bits, a restored snapshot)
// fails, and its end must leave that record alone: it is another term's,
// whose child may still run. etcd's lease IDs follow one another, so the
// records are put under the next IDs of a probe lease's.
func TestFailedCampaignLeavesAnotherTermsRecord(t *testing.T) {
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	f := newFixture(t, cli)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	probe, err := cli.Grant(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, probe.ID); err != nil {
		t.Fatal(err)
	}
	const next = 200
	rec, err := json.Marshal(campaign.TermRecord{Key: f.l.QueuePrefix() + "other", TTL: 10, RaftTerm: 1})
	if err != nil {
		t.Fatal(err)
	}
	for from := 1; from <= next; from += 100 {
		var ops []clientv3.Op
		for i := from; i < from+100; i++ {
			ops = append(ops, clientv3.OpPut(f.l.RecordKey(probe.ID+clientv3.LeaseID(i)), string(rec)))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	_, err = f.campaigner(false).Campaign(ctx)
	if !errors.Is(err, campaign.ErrKeyDeleted) {
		t.Fatalf("campaign: %v; want %v, its lease ID among the %d after the probe's", err, campaign.ErrKeyDeleted, next)
	}
	resp, err := cli.Get(ctx, f.l.RecordPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != next {
		t.Fatalf("%d records left of %d: the failed campaign's end deleted another term's", resp.Count, next)
	}
}

// etcd run with a longer election timeout than its default: a replaced
// raft leader may credit a renewal for that long after a sweep, and the
// hold of a candidate that never saw the swept term covers it, as etcd
// says it through the least TTL it grants.
func TestSweptTermHeldForEtcdsElectionTimeout(t *testing.T) {
	skipIfShort(t)
	const election = 3 * time.Second
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3,
		ExtraArgs: []string{"--election-timeout=3000", "--heartbeat-interval=300"}})
	m := newMovingLeader(t, cluster, campaign.MinTTL)
	m.move(t)
	at := m.sweep(t)
	log := newTestLog()
	d := m.candidate(t, campaign.MinTTL, log).lead()
	if now := bootclock.Now(); now < at+m.a.TTL+election {
		t.Errorf("D leads %s after A's lease was swept, before A's TTL of %s and etcd's election timeout of %s had passed",
			now-at, m.a.TTL, election)
	}
	if !log.has(holdLine) {
		t.Errorf("D did not say it waits out A:\n%s", log)
	}
	d.Revoke()
}
