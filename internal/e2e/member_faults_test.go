package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// Faults of one etcd member of three while a leader holds, at TTL 2s, with
// every candidate given all three endpoints: the two other members keep a
// quorum, so none of these may cost the leader its term.

// fastTTL is the TTL of fast.
const fastTTL = 2 * time.Second

// termKept fails the test if c1 logged, from line from on, a sign of its
// term ending (its fence, a lost lease), or if the waiter's child started.
// Warnings that do not end a term (a failed renewal attempt that a later one
// made good) are logged, not failed: they cost no term. It says whether the
// term was kept.
func termKept(t *testing.T, fault string, c1, c2 *candidate, from int) bool {
	t.Helper()
	kept := true
	for _, bad := range []string{"fence", "lease lost"} {
		if l, ok := c1.log.findFrom(bad, from); ok {
			t.Errorf("%s: the leader logged %q", fault, l)
			kept = false
		}
	}
	for _, warn := range []string{"renewal failed", "renewal unanswered", "renewal recovered"} {
		if l, ok := c1.log.findFrom(warn, from); ok {
			t.Logf("%s: the leader logged %q", fault, l)
		}
	}
	if l, ok := c2.out.find("ready"); ok {
		t.Errorf("%s: the waiter's child started while the leader's lease was renewable: %q", fault, l)
		kept = false
	}
	return kept
}

// afterFault waits one TTL after a fault ended: a renewal that the fault
// made fail ends the term within the outage tolerance, under a TTL, so a
// term that outlives this wait was not cost by the fault. The duration is
// the observation, not a wait for an event.
func afterFault() { time.Sleep(fastTTL) }

// A restart, of one of two kinds: graceful (SIGTERM, after which a member
// with streams open may take seconds to exit) or a crash (SIGKILL). Either
// way the member starts again as soon as it has exited.
type restart struct {
	kind string
	stop func(testing.TB, *etcdtest.Member)
}

var restarts = []restart{
	{"graceful", func(tb testing.TB, m *etcdtest.Member) { m.Stop(tb) }},
	{"crash", func(tb testing.TB, m *etcdtest.Member) { m.Kill(tb) }},
}

// restartMember restarts member i the way r says and logs for how long it
// was stopping and then down.
func restartMember(t *testing.T, cluster *etcdtest.Cluster, i int, r restart) {
	t.Helper()
	m := cluster.Member(i)
	start := time.Now()
	r.stop(t, m)
	stopped := time.Now()
	m.Restart(t)
	t.Logf("member %d: %s stop took %v, then serving again after %v", i, r.kind,
		stopped.Sub(start).Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
}

// Every follower member restarted in turn while a leader holds and a
// waiter waits: whatever streams of theirs the followers carried
// (renewals, watches), the leader keeps its term.
func TestRestartedFollowersKeepLeader(t *testing.T) {
	skipIfShort(t)
	for _, r := range restarts {
		t.Run(r.kind, func(t *testing.T) {
			cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
			e := newEnv(t, cluster.Endpoints())
			c1, c2 := e.leaderAndWaiter(fast)
			leader := cluster.RaftLeader(t)
			for i := range 3 {
				if i == leader {
					continue
				}
				from := c1.log.mark()
				restartMember(t, cluster, i, r)
				afterFault()
				if !termKept(t, fmt.Sprintf("follower %d restarted", i), c1, c2, from) {
					break
				}
			}
			stopAll(t, e, c1, c2)
		})
	}
}

// The member that holds the leader's renewal stream, a follower, restarted:
// the stream ends with the member, or goes quiet while it stops, and the
// renewals must reach another member in time.
func TestRestartedRenewalMemberKeepsLeader(t *testing.T) {
	skipIfShort(t)
	for _, r := range restarts {
		t.Run(r.kind, func(t *testing.T) {
			cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
			e := newEnv(t, cluster.Endpoints())
			// This test is of a follower: a restarted raft leader costs an
			// etcd election, longer than the outage tolerance at this TTL.
			c1, c2, on := renewalPair(t, cluster, e, fast, false)
			from := c1.log.mark()
			restartMember(t, cluster, on, r)
			afterFault()
			termKept(t, "renewal member restarted", c1, c2, from)
			stopAll(t, e, c1, c2)
		})
	}
}

// bloat leaves a database of many megabytes on every member: keys put and
// deleted, not compacted, so that a defrag has their revisions to copy.
func bloat(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	val := strings.Repeat("x", 4<<10)
	for i := range 250 {
		var ops []clientv3.Op
		for j := range 100 { // etcd's default limit on a transaction's operations is 128
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("bloat/%d/%d", i, j), val))
		}
		if _, err := cli.Txn(ctxT(t)).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Delete(ctxT(t), "bloat/", clientPrefix()); err != nil {
		t.Fatal(err)
	}
}

// busy puts a key every few milliseconds, as the other users of a shared
// etcd would, until the returned func is called; that returns how many puts
// were made.
func busy(t *testing.T, cli *clientv3.Client) func() int {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxT(t))
	puts := make(chan int)
	go func() {
		n := 0
		for ; ctx.Err() == nil; n++ {
			_, _ = cli.Put(ctx, "busy", "x")
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
		puts <- n
	}()
	return func() int {
		cancel()
		return <-puts
	}
}

// defragKeeps defragments member i and fails the test unless the leader
// kept its term; it says whether it did.
func defragKeeps(t *testing.T, cluster *etcdtest.Cluster, i int, what string, c1, c2 *candidate) bool {
	t.Helper()
	st, err := cluster.Client(t).Status(ctxT(t), cluster.Member(i).ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	from := c1.log.mark()
	took := cluster.Member(i).Defrag(t)
	t.Logf("member %d (%s) defragmented, %d MB, in %v", i, what, st.DbSize>>20, took.Round(time.Millisecond))
	afterFault()
	return termKept(t, fmt.Sprintf("member %d (%s) defragmented", i, what), c1, c2, from)
}

// Every member defragmented in turn (`etcdctl defrag` aimed at one member)
// while a leader holds, on an etcd that is otherwise idle: first the member
// that holds the leader's renewal stream, made the raft leader, then the
// others. A defragmenting member answers little or nothing until it is done.
func TestDefragmentedMembersKeepLeader(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
	bloat(t, cluster.Client(t))
	e := newEnv(t, cluster.Endpoints())
	c1, c2, on := renewalPair(t, cluster, e, fast, true)
	if defragKeeps(t, cluster, on, "raft leader, with the renewal stream", c1, c2) {
		for _, i := range []int{(on + 1) % 3, (on + 2) % 3} {
			if !defragKeeps(t, cluster, i, "follower", c1, c2) {
				break
			}
		}
	}
	stopAll(t, e, c1, c2)
}

// The followers defragmented in turn while etcd takes writes, first the one
// that holds the leader's renewal stream. The raft leader is left out on
// purpose: while it has writes it has not applied, etcd renews no lease at
// any member, so its defrag under writes costs the term once it outlasts
// the outage tolerance (docs/design.md, the fault table).
func TestDefragmentedFollowersUnderWritesKeepLeader(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
	cli := cluster.Client(t)
	bloat(t, cli)
	e := newEnv(t, cluster.Endpoints())
	c1, c2, on := renewalPair(t, cluster, e, fast, false)
	puts := busy(t, cli)
	if defragKeeps(t, cluster, on, "follower, with the renewal stream", c1, c2) {
		defragKeeps(t, cluster, (on+2)%3, "follower", c1, c2)
	}
	t.Logf("%d puts meanwhile", puts())
	stopAll(t, e, c1, c2)
}
