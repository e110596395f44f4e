package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
	"github.com/etcdlead/etcdlead/internal/testsupport/faultproxy"
)

// The fault suite. Every case ends with a check that a leader exists, and
// the probe's lock is the overlap oracle: a second copy of the child cannot
// take it while the first (or an orphan of it) lives, and says OVERLAP.

// TTL 6s leaves an outage tolerance worth testing: K = 1.5s (T/4),
// m = 300ms, r = 600ms, tolerance = 3.6s.
var slow = []string{"--ttl=6s", "--log-level=trace"}

func newProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// leaderPair starts c1 (through a proxy) leading and c2 (direct) queued.
func leaderPair(t *testing.T, flags []string, probeFlags ...string) (*etcdtest.Cluster, *env, *faultproxy.Proxy, *candidate, *candidate) {
	t.Helper()
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	p := newProxy(t, cluster.Endpoints()[0])
	c1 := e.via(p.Addr()).start("c1", flags, e.probe(probeFlags...))
	c1.out.waitFor(t, "c1", "ready", 0)
	c2 := e.start("c2", flags, e.probe())
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
	return cluster, e, p, c1, c2
}

func stopAll(t *testing.T, e *env, cs ...*candidate) {
	t.Helper()
	for _, c := range cs {
		c.stop(t)
	}
	for _, c := range cs {
		c.exit(t)
	}
	e.journalLines(t)
}

func leaseOf(t *testing.T, cli *clientv3.Client, prefix, id string) (key string, lease clientv3.LeaseID) {
	t.Helper()
	resp, err := cli.Get(ctxT(t), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if string(kv.Value) == id {
			return string(kv.Key), clientv3.LeaseID(kv.Lease)
		}
	}
	t.Fatalf("no key of %s under %s", id, prefix)
	return "", 0
}

// A leader cut off from etcd has its child stopped by the fence before its
// lease can expire, so the successor starts only after; after the heal the
// old supervisor campaigns again. The same with a --notify command that
// hangs on every candidate: the fence and the handoff never wait for it,
// and the leader's command for leader still runs at the fence (its
// timeout is logged after).
func TestPartitionedLeaderIsFencedBeforeSuccessorStarts(t *testing.T) {
	skipIfShort(t)
	for _, c := range []struct {
		name   string
		notify bool
	}{{"plain", false}, {"notify hangs", true}} {
		t.Run(c.name, func(t *testing.T) {
			flags := fast
			if c.notify {
				flags = append([]string{"--notify=sleep 1000"}, fast...)
			}
			_, e, p, c1, c2 := leaderPair(t, flags)
			p.Blackhole()
			_, fenced := c1.log.waitFor(t, "c1", "fence: lease deadline near", 0)
			c1.out.waitFor(t, "c1", "signal SIGTERM", 0)
			c2.out.waitFor(t, "c2", "ready", 0)
			p.Pass()
			_, i := c1.log.waitFor(t, "c1", "child exited", 0)
			c1.log.waitFor(t, "c1", "waiting on predecessor", i)
			if c.notify {
				if _, j := c1.log.waitFor(t, "c1", "--notify failed: role=leader", 0); j < fenced {
					t.Errorf("the command for leader ended before the fence: it was no hanging command there")
				}
			}
			stopAll(t, e, c1, c2)
		})
	}
}

// A frozen supervisor cannot keep its child alive: the keeper fences on
// its own clock. After SIGCONT the supervisor campaigns again.
func TestFrozenSupervisorIsFenced(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // it mostly waits: for a lease to end, a freeze, a --wait
	_, e, _, c1, c2 := leaderPair(t, fast)
	c1.signal(t, syscall.SIGSTOP)
	frozen := time.Now()
	c1.log.waitFor(t, "c1", "fence: lease deadline near", 0)
	c2.out.waitFor(t, "c2", "ready", 0)
	// Stay frozen for 3xTTL in all, as a long GC pause or a stopped VM
	// would; the duration is the fault, not a wait for an event.
	time.Sleep(time.Until(frozen.Add(3 * 2 * time.Second)))
	c1.signal(t, syscall.SIGCONT)
	_, i := c1.log.waitFor(t, "c1", "child exited", 0)
	c1.log.waitFor(t, "c1", "waiting on predecessor", i)
	stopAll(t, e, c1, c2)
}

// An operator deletes the leader's key with a plain Delete while a
// successor waits: the old child is stopped before the new one starts. The
// successor waits on the old term's sentinel, which goes with the lease,
// which the old leader revokes only once its child is gone.
func TestDeletedKeyStopsOldChildFirst(t *testing.T) {
	skipIfShort(t)
	// The old child ignores SIGTERM, so it lives on for the kill timeout
	// (1.5s) after the delete: the successor must not start meanwhile.
	cluster, e, _, c1, c2 := leaderPair(t, slow, "-ignore-term")
	cli := cluster.Client(t)
	key, _ := leaseOf(t, cli, e.prefix, "c1")
	if _, err := cli.Delete(ctxT(t), key); err != nil {
		t.Fatal(err)
	}
	c1.log.waitFor(t, "c1", "key deleted", 0)
	c1.out.waitFor(t, "c1", "signal SIGTERM", 0)
	c1.stoppedBySupervisor(t)
	// Had c2 started while c1's child held the probe's lock, its child
	// would have said OVERLAP and ended without "ready".
	c2.out.waitFor(t, "c2", "ready", 0)
	stopAll(t, e, c1, c2)
}

// A lease revoked by hand is gone at once, so nothing can wait for it: this
// case is bounded, not zero (docs/how-it-works.md). The old child must be signalled at
// once and be gone within its stop time plus a generous bound.
func TestRevokedLeaseStopsOldChildPromptly(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c1 := e.start("c1", fast, e.probe())
	c1.out.waitFor(t, "c1", "ready", 0)
	// The successor gets a lock of its own: overlap is possible here, by
	// design, for at most the old child's stop time.
	e2 := *e
	e2.lock += ".2"
	c2 := e2.start("c2", fast, e2.probe())
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
	cli := cluster.Client(t)
	_, lease := leaseOf(t, cli, e.prefix, "c1")
	if _, err := cli.Revoke(ctxT(t), lease); err != nil {
		t.Fatal(err)
	}
	c1.out.waitFor(t, "c1", "signal SIGTERM", 0)
	// Stopped by its supervisor on the revoke, not by the fence later.
	c1.stoppedBySupervisor(t)
	c2.out.waitFor(t, "c2", "ready", 0)
	stopAll(t, e, c1, c2)
}

// Shorter than the outage tolerance: the leader keeps leading. Longer: the
// fence stops the child while the lease still exists in etcd, and a leader
// follows once etcd is back.
func TestEtcdOutageShortThenLong(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // it mostly waits: for a lease to end, a freeze, a --wait
	cluster, e, p, c1, c2 := leaderPair(t, slow, "-ignore-term")
	_, before := c1.log.waitFor(t, "c1", "renewed", 0)
	p.Blackhole()
	_, i := c1.log.waitFor(t, "c1", "renewal unanswered", before)
	// The fault itself lasts a while; this sleep is the outage, not a wait
	// for an event. 1s is well inside the 3.6s tolerance.
	time.Sleep(time.Second)
	p.Pass()
	_, i = c1.log.waitFor(t, "c1", "renewal recovered", i)
	if _, ok := c1.out.find("signal"); ok {
		t.Fatal("a short outage signalled the child")
	}
	if _, ok := c2.out.find("ready"); ok {
		t.Fatal("a short outage handed leadership over")
	}

	cli := cluster.Client(t)
	_, lease := leaseOf(t, cli, e.prefix, "c1")
	p.Blackhole()
	c1.out.waitFor(t, "c1", "signal SIGTERM", 0)
	// The child ignores SIGTERM, so the keeper's SIGKILL at deadline-m ends
	// it: the lease must still be alive in etcd when that happens.
	c1.log.waitFor(t, "c1", "child exited: status=137 reason=fenced", i)
	ttl, err := cli.TimeToLive(ctxT(t), lease)
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL == -1 {
		t.Fatal("the lease had expired before the fence killed the child")
	}
	c2.out.waitFor(t, "c2", "ready", 0)
	p.Pass()
	stopAll(t, e, c1, c2)
}

// Three etcd members, all endpoints given: killing the raft leader member
// does not end the etcdlead leader's term.
func TestRaftLeaderLossKeepsLeader(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
	e := newEnv(t, cluster.Endpoints())
	c1, c2 := e.leaderAndWaiter(slow)
	c1.log.waitFor(t, "c1", "renewed", 0)
	cluster.Member(cluster.RaftLeader(t)).Kill(t)
	cluster.RaftLeader(t) // a new raft leader among the two left
	// Two renewals after the new raft leader serves, the term is intact;
	// only lines logged from here on count.
	_, i := c1.log.waitFor(t, "c1", "renewed", c1.log.mark())
	c1.log.waitFor(t, "c1", "renewed", i+1)
	if _, ok := c1.out.find("signal"); ok {
		t.Fatal("the etcd election stopped the child")
	}
	if _, ok := c2.out.find("ready"); ok {
		t.Fatal("the etcd election handed leadership over")
	}
	stopAll(t, e, c1, c2)
}

// Watches resumed from a compacted revision (the connection to etcd is
// reset, and the client resumes each watch from its last revision) are
// neither a loss of leadership nor a crash, for the leader and for the
// waiter; a handoff afterwards still works.
func TestCompactedWatchRevisions(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	p := newProxy(t, cluster.Endpoints()[0])
	c1 := e.via(p.Addr()).start("c1", slow, e.probe())
	c1.out.waitFor(t, "c1", "ready", 0)
	c2 := e.via(p.Addr()).start("c2", slow, e.probe())
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
	cli := cluster.Client(t)
	var last int64
	for i := 0; i < 20; i++ {
		resp, err := cli.Put(ctxT(t), "other/key", strings.Repeat("x", i))
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	if _, err := cli.Compact(ctxT(t), last, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	c1.log.waitFor(t, "c1", "renewed", 0)
	before := c1.log.mark()
	p.Reset()
	p.Pass()
	_, i := c1.log.waitFor(t, "c1", "renewed", c1.log.mark())
	c1.log.waitFor(t, "c1", "renewed", i+1)
	if _, ok := c1.out.find("signal"); ok {
		t.Fatal("compaction stopped the leader's child")
	}
	// The case happened as claimed: both watches met the compaction.
	c1.log.waitFor(t, "c1", "own-key watch interrupted; re-reading the key: error=\"etcdserver: mvcc: required revision has been compacted\"", before)
	c2.log.waitFor(t, "c2", "predecessor watch interrupted; looking again: error=\"etcdserver: mvcc: required revision has been compacted\"", 0)
	c1.signal(t, syscall.SIGTERM)
	c1.exit(t)
	c2.out.waitFor(t, "c2", "ready", 0)
	stopAll(t, e, c2)
}

// Leases ended early, the leader's and a waiter's at once, after a raft
// leader change, while the leader's supervisor is frozen: as an etcd raft
// leader that was frozen itself revokes them when it resumes, although
// another member renewed them (docs/design.md, "The term record"). The
// leader's child runs on until its keeper's fence, up to a TTL later. The
// waiter, whose own term ended with its lease, campaigns again at once
// and finds nothing ahead but the leader's record: it must wait out the
// leader's TTL before it takes that record away and starts (its probe
// would say OVERLAP and never "ready").
func TestSweptLeaderAndWaiterLeaderFrozen(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
	e := newEnv(t, cluster.Endpoints())
	cli := cluster.Client(t)
	c1 := e.start("c1", fast, e.probe())
	c1.out.waitFor(t, "c1", "ready", 0)
	c2 := e.start("c2", fast, e.probe())
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
	_, l1 := leaseOf(t, cli, e.prefix, "c1")
	_, l2 := leaseOf(t, cli, e.prefix, "c2")
	c1.signal(t, syscall.SIGSTOP)
	cluster.MoveLeader(t, (cluster.RaftLeader(t)+1)%3)
	for _, l := range []clientv3.LeaseID{l1, l2} {
		if _, err := cli.Revoke(ctxT(t), l); err != nil {
			t.Fatal(err)
		}
	}
	c2.log.waitFor(t, "c2", "waiting out its TTL before taking its record away", 0)
	c1.log.waitFor(t, "c1", "fence: lease deadline near", 0)
	c2.out.waitFor(t, "c2", "ready", 0)
	c1.signal(t, syscall.SIGCONT)
	stopAll(t, e, c1, c2)
}

// The leader's lease alone revoked after a raft leader change, as a resumed
// raft leader's sweep revokes it (docs/design.md, "The term record"): the waiter's lease came after the change, so the sweep
// leaves it, and nothing ahead of it is left. The leader's child ignores
// SIGTERM, so it runs for the kill timeout after the leader hears of the
// revoke. The waiter must wait out the leader's TTL before it starts, or
// its probe says OVERLAP.
func TestEarlyEndAfterRaftLeaderChangeIsWaitedOut(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
	e := newEnv(t, cluster.Endpoints())
	cli := cluster.Client(t)
	c1 := e.start("c1", slow, e.probe("-ignore-term"))
	c1.out.waitFor(t, "c1", "ready", 0)
	c2 := e.start("c2", slow, e.probe())
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
	cluster.MoveLeader(t, (cluster.RaftLeader(t)+1)%3)
	_, l1 := leaseOf(t, cli, e.prefix, "c1")
	if _, err := cli.Revoke(ctxT(t), l1); err != nil {
		t.Fatal(err)
	}
	c1.out.waitFor(t, "c1", "signal", 0) // its child heard SIGTERM and runs on
	c2.log.waitFor(t, "c2", "waiting out its TTL before taking its record away", 0)
	c2.out.waitFor(t, "c2", "ready", 0)
	stopAll(t, e, c1, c2)
}
