package e2e

import (
	"strings"
	"syscall"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// The barrier under what an operator, another program or a second
// election can do to the keys (docs/design.md, "Why each fault is
// covered"). The probe's flock is the oracle throughout: a child that
// starts while an older one (or its orphan) still runs says OVERLAP.

// put writes a key as a foreign program would, optionally under a lease.
func put(t *testing.T, cli *clientv3.Client, key, val string, opts ...clientv3.OpOption) {
	t.Helper()
	if _, err := cli.Put(ctxT(t), key, val, opts...); err != nil {
		t.Fatal(err)
	}
}

func del(t *testing.T, cli *clientv3.Client, key string) {
	t.Helper()
	if _, err := cli.Delete(ctxT(t), key); err != nil {
		t.Fatal(err)
	}
}

// A candidate that arrives after the leader's key was deleted, while the
// old child still stops (it ignores SIGTERM for the kill timeout), finds
// no queue key ahead but the old term's sentinel, and waits for its lease.
func TestNewcomerAfterKeyDeleteWaitsForOldLease(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	e := newEnv(t, cluster.Endpoints())
	c1 := e.start("c1", slow, e.probe("-ignore-term"))
	c1.out.waitFor(t, "c1", "ready", 0)
	key, _ := leaseOf(t, cli, e.prefix, "c1")
	del(t, cli, key)
	c1.out.waitFor(t, "c1", "signal SIGTERM", 0)
	c2 := e.start("c2", slow, e.probe())
	c2.log.waitFor(t, "c2", "waiting for predecessor lease to end", 0)
	c2.out.waitFor(t, "c2", "ready", 0)
	c1.log.waitFor(t, "c1", "child exited", 0)
	stopAll(t, e, c1, c2)
}

// The same through a chain: c1 frozen and its key deleted; c2, queued
// before the delete, waits on c1; c3 arrives after the delete and sees c2
// only in the queue. When c2 leaves, c3 must still wait for c1's lease,
// whose keeper runs c1's child until c1's fence.
func TestNewcomerBehindLeaverWaitsForFrozenLease(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // it mostly waits: for a lease to end, a freeze, a --wait
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	e := newEnv(t, cluster.Endpoints())
	c1, c2 := e.leaderAndWaiter(slow)
	c1.signal(t, syscall.SIGSTOP)
	key, _ := leaseOf(t, cli, e.prefix, "c1")
	del(t, cli, key)
	c3 := e.start("c3", slow, e.probe())
	c3.log.waitFor(t, "c3", "waiting on predecessor", 0)
	c2.signal(t, syscall.SIGTERM)
	if code := c2.exit(t); code != 0 {
		t.Errorf("c2 exit %d, want 0", code)
	}
	c3.out.waitFor(t, "c3", "ready", 0)
	c1.log.waitFor(t, "c1", "fence: lease deadline near", 0)
	c1.signal(t, syscall.SIGCONT)
	stopAll(t, e, c1, c2, c3)
}

// Keys that are not etcdlead's (a value put twice, which looked like the
// old barrier mark, and a key with no lease) are not candidates: they
// neither vouch for an older term nor hide one, and deleting them moves
// nothing.
func TestForeignKeysNeitherVouchNorBlock(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	e := newEnv(t, cluster.Endpoints())
	p := e.prefix + "probe/"
	c1 := e.start("c1", slow, e.probe("-ignore-term"))
	c1.out.waitFor(t, "c1", "ready", 0)
	key, _ := leaseOf(t, cli, e.prefix, "c1")
	put(t, cli, p+"2", "c")
	// Put twice: the mod revision passes the create revision.
	put(t, cli, p+"zzz", "a")
	put(t, cli, p+"zzz", "a")
	c2 := e.start("c2", slow, e.probe())
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
	del(t, cli, key)
	c1.out.waitFor(t, "c1", "signal SIGTERM", 0)
	del(t, cli, p+"zzz")
	del(t, cli, p+"2")
	c2.out.waitFor(t, "c2", "ready", 0)
	c1.log.waitFor(t, "c1", "child exited", 0)
	el := e.status(t, "probe")
	if el.Leader == nil || el.Leader.ID != "c2" {
		t.Errorf("status: leader %+v, want c2", el.Leader)
	}
	stopAll(t, e, c1, c2)
}

// A key with no lease, put by hand where a candidate would be, blocks
// nothing and is not a leader; status counts it as skipped.
func TestLeaselessKeyBlocksNothing(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	e := newEnv(t, cluster.Endpoints())
	put(t, cli, e.prefix+"probe/zzz", "foo")
	put(t, cli, e.prefix+"probe/694d8f1c2a3b9e05", "no lease")
	// A hex name under a live lease that is not the one it names.
	lease, err := cli.Grant(ctxT(t), 60)
	if err != nil {
		t.Fatal(err)
	}
	put(t, cli, e.prefix+"probe/1", "other lease", clientv3.WithLease(lease.ID))
	if el := e.status(t, "probe"); el.Leader != nil || el.Skipped != 3 {
		t.Errorf("status before any candidate: leader %+v, skipped %d; want none and 3", el.Leader, el.Skipped)
	}
	c1 := e.start("c1", fast, e.probe())
	c1.out.waitFor(t, "c1", "ready", 0)
	if el := e.status(t, "probe"); el.Leader == nil || el.Leader.ID != "c1" {
		t.Errorf("status: leader %+v, want c1", el.Leader)
	}
	stopAll(t, e, c1)
}

// Election y placed inside election x by its prefix (--prefix P/x/) is
// another election: it neither blocks x, nor shows as x's leader, nor is
// deleted by a forced resign of x.
func TestNestedElectionIsNotACandidate(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	inner := *e
	inner.prefix = e.prefix + "probe/"
	inner.lock += ".inner"
	cy := inner.start("cy", append([]string{"--election=y"}, fast...), inner.probe())
	cy.out.waitFor(t, "cy", "ready", 0)
	cx := e.start("cx", fast, e.probe())
	cx.out.waitFor(t, "cx", "ready", 0)
	el := e.status(t, "probe")
	if el.Leader == nil || el.Leader.ID != "cx" || len(el.Waiting) != 0 {
		t.Errorf("status of x: leader %+v, waiting %v; want cx alone", el.Leader, ids(el.Waiting))
	}
	// Every election under the prefix: x, and not y's sentinels.
	out, errs, code := e.etcdleadCmd("status")
	if code != 0 || strings.Contains(out, ".lease") || !strings.Contains(out, "cx") {
		t.Errorf("status of all: exit %d\n%s%s", code, out, errs)
	}
	cx.signal(t, syscall.SIGSTOP)
	out, errs, code = e.etcdleadCmd("resign", "--election=probe", "--timeout=300ms", "--force")
	if code != 0 || !strings.Contains(out, "deleted the key of cx") {
		t.Errorf("resign --force of x: exit %d, %q %q", code, out, errs)
	}
	if _, ok := cy.log.find("key deleted"); ok {
		t.Error("resign of x deleted y's key")
	}
	cx.signal(t, syscall.SIGCONT)
	cx.log.waitFor(t, "cx", "child exited", 0)
	stopAll(t, e, cx)
	stopAll(t, &inner, cy)
}

// A resign aimed at the candidate first in the queue while it still waits
// for an older lease reaches it: it gives up its term, and resign says so.
func TestResignReachesCandidateInBarrier(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	e := newEnv(t, cluster.Endpoints())
	c1, c2 := e.leaderAndWaiter(slow)
	c1.signal(t, syscall.SIGSTOP)
	key, _ := leaseOf(t, cli, e.prefix, "c1")
	del(t, cli, key)
	// c2 now heads the queue but waits for c1's lease (c1 is frozen).
	out, errs, code := e.etcdleadCmd("resign", "--election=probe", "--id=c2", "--timeout=3s")
	if code != 0 || !strings.Contains(out, "c2 stepped down") {
		t.Fatalf("resign of c2 in its barrier: exit %d, %q %q", code, out, errs)
	}
	if _, ok := c2.out.find("ready"); ok {
		t.Error("c2 started a child although it was asked to resign")
	}
	c1.signal(t, syscall.SIGCONT)
	stopAll(t, e, c1, c2)
}

// resign --force with the default --dial-timeout and a --timeout longer
// than it: the delete has its own bound, not what is left of the wait's.
func TestResignForceAfterLongTimeout(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c1 := e.start("c1", slow, e.probe())
	c1.out.waitFor(t, "c1", "ready", 0)
	c1.signal(t, syscall.SIGSTOP)
	out, errs, code := e.etcdleadCmd("resign", "--election=probe", "--dial-timeout=1s", "--timeout=2s", "--force")
	if code != 0 || !strings.Contains(out, "deleted the key of c1") {
		t.Errorf("resign --force: exit %d, %q %q", code, out, errs)
	}
	c1.signal(t, syscall.SIGCONT)
	stopAll(t, e, c1)
}

// --timeout firing while a stop for lost leadership is under way: the
// leadership was lost first, so --once says 76, not 124.
func TestTimeoutDuringLostLeadershipStopExits76(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	e := newEnv(t, cluster.Endpoints())
	c := e.start("once", []string{"--ttl=10s", "--kill-timeout=5s", "--once", "--timeout=3s"}, e.probe("-ignore-term"))
	c.out.waitFor(t, "once", "ready", 0)
	key, _ := leaseOf(t, cli, e.prefix, "once")
	del(t, cli, key)
	c.out.waitFor(t, "once", "signal SIGTERM", 0)
	if got := c.exit(t); got != 76 {
		t.Fatalf("exit %d, want 76\n%s", got, c.log)
	}
}

// --wait ending while etcd is cut off after this candidate queued: the last
// request failed to reach etcd, so it is 125 (etcd unreachable), not 75.
func TestWaitEndingInOutageAfterQueueingIs125(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // it mostly waits: for a lease to end, a freeze, a --wait
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c1 := e.start("c1", slow, e.probe())
	c1.out.waitFor(t, "c1", "ready", 0)
	p := newProxy(t, cluster.Endpoints()[0])
	c2 := e.via(p.Addr()).start("c2", append([]string{"--wait=4s"}, slow...), e.probe())
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
	p.Blackhole()
	if got := c2.exit(t); got != 125 {
		t.Errorf("exit %d, want 125\n%s", got, c2.log)
	}
	if _, ok := c2.log.find("unreachable"); !ok {
		t.Errorf("c2 did not say etcd was unreachable:\n%s", c2.log)
	}
	p.Pass()
	stopAll(t, e, c1)
}
