package campaign_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// watchStreams is how many Watch streams each member has open.
func watchStreams(t *testing.T, c *etcdtest.Cluster) []int {
	t.Helper()
	var n []int
	for _, m := range c.Members() {
		n = append(n, m.OpenStreams(t, "Watch"))
	}
	return n
}

// settle waits until the cluster holds total Watch streams, and returns
// them by member.
func settle(t *testing.T, c *etcdtest.Cluster, total int) []int {
	t.Helper()
	for deadline := time.Now().Add(safety); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		n := watchStreams(t, c)
		sum := 0
		for _, k := range n {
			sum += k
		}
		if sum == total {
			return n
		}
	}
	t.Fatalf("the cluster did not come to hold %d watch streams", total)
	return nil
}

// frozenWaiter sets up a leader and a candidate waiting behind it, both at
// the shortest TTL on clients of all three members, then freezes the
// member that holds the waiter's watch stream (moving the raft leadership
// off it first, so that the cluster keeps serving at once: this is a
// stalled stream, not an etcd election).
// It returns a client of the two others beside.
func frozenWaiter(t *testing.T) (*fixture, *campaign.Term, <-chan result, *clientv3.Client) {
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
	fa := newFixture(t, etcdtest.NewClient(t, cluster.Endpoints()...))
	fb := newFixture(t, etcdtest.NewClient(t, cluster.Endpoints()...))
	fa.ttl, fb.ttl = campaign.MinTTL, campaign.MinTTL
	fb.n = 1 // ids apart
	a := fa.lead()
	before := settle(t, cluster, 1) // the leader's term stream
	b := fb.start(t.Context())
	after := settle(t, cluster, 2)
	frozen := -1
	for i := range after {
		if after[i] > before[i] {
			frozen = i
		}
	}
	fb.next(b, newest(t, fb.cli, fb.l))
	return fb, a, b, freezeFollower(t, cluster, frozen)
}

// freezeFollower freezes member i, moving the raft leadership off it first
// so that the cluster keeps serving at once (a stalled stream, not an etcd
// election), thaws it at cleanup, and returns a client of the two others.
func freezeFollower(t *testing.T, cluster *etcdtest.Cluster, i int) *clientv3.Client {
	t.Helper()
	if cluster.RaftLeader(t) == i {
		cluster.MoveLeader(t, (i+1)%3)
	}
	cluster.Member(i).Freeze(t)
	t.Cleanup(func() { cluster.Member(i).Thaw(t) })
	var others []string
	for j, m := range cluster.Members() {
		if j != i {
			others = append(others, m.ClientAddr())
		}
	}
	return etcdtest.NewClient(t, others...)
}

// A waiter whose watch stream is on a frozen member still wakes when the
// term ahead ends: its stream answers no progress request, so its watches
// are opened again on another member, from where they stood, and hear the
// revoke's deletes there. The handoff completes within T/2 of the revoke,
// the bound for a handoff during a frozen member.
func TestWaiterWakesPastFrozenStream(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	_, a, b, _ := frozenWaiter(t)
	start := time.Now()
	a.Revoke()
	bound := campaign.MinTTL / 2
	select {
	case r := <-b:
		if r.err != nil {
			t.Fatalf("the waiter's campaign failed: %v", r.err)
		}
		t.Cleanup(r.term.Revoke)
		took := time.Since(start)
		t.Logf("led %s after the revoke", took)
		if took > bound {
			t.Errorf("the waiter took %s after the revoke to lead, want at most %s", took, bound)
		}
	case <-time.After(safety):
		t.Fatalf("the waiter never woke: its watch stream is on the frozen member")
	}
}

// A waiter's guard, on the same frozen stream, notices its own key deleted
// as soon as the stream is found stalled and its watches opened again
// elsewhere: within T/2, not at a periodic read seconds later.
func TestGuardNoticesDeleteOnFrozenStream(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	fb, _, b, cli := frozenWaiter(t)
	key := newest(t, cli, fb.l)
	start := time.Now()
	if _, err := cli.Delete(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	bound := campaign.MinTTL / 2
	select {
	case r := <-b:
		fromWatch(t, r.err, campaign.ErrKeyDeleted)
		took := time.Since(start)
		t.Logf("noticed %s after the delete", took)
		if took > bound {
			t.Errorf("the guard noticed its key deleted %s after the delete, want at most %s", took, bound)
		}
	case <-time.After(safety):
		t.Fatalf("the waiter's guard never noticed its key deleted")
	}
}

// An idle leader's guard asks its stream nothing once a progress answer
// confirmed the revision the renewals' answers name: with nothing written,
// there is nothing the stream could have failed to deliver. A write moves
// the revision, and the guard asks again at its next pause's end.
func TestIdleLeaderGuardAsksNothing(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := etcdtest.NewClient(t, cluster.Endpoints()...)
	fa := newFixture(t, cli)
	fa.ttl = campaign.MinTTL
	a := fa.lead()
	held := hold(a)
	every := campaign.GuardEvery(campaign.MinTTL)
	waitAsks := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(safety); a.ProgressAsks() < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the guard asked %d times in %s, want %d", a.ProgressAsks(), safety, n)
			}
		}
	}
	waitAsks(1)
	// Two of the guard's pauses, idle: the window measured, not a wait
	// for an event.
	time.Sleep(2*every + every/2)
	if n := a.ProgressAsks(); n != 1 {
		t.Errorf("an idle leader's guard asked its stream %d times in %s after the first answer, want none", n-1, 2*every+every/2)
	}
	if _, err := cli.Put(t.Context(), "elsewhere", "x"); err != nil {
		t.Fatal(err)
	}
	waitAsks(2)
	select {
	case err := <-held:
		t.Fatalf("the leader's term ended: %v", err)
	default:
	}
}

// A leader's guard whose stream is on a frozen member notices its key
// deleted through the other members: the delete moves the revision, which
// the leader's renewals (on a member that answers) name, so the guard asks
// its stream at its next pause's end, finds it stalled, and watches again
// elsewhere.
func TestLeaderGuardNoticesDeleteOnFrozenStream(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
	fa := newFixture(t, etcdtest.NewClient(t, cluster.Endpoints()...))
	fa.ttl = campaign.MinTTL
	a := fa.lead()
	held := hold(a)
	on := settle(t, cluster, 1)
	frozen := -1
	for i, n := range on {
		if n > 0 {
			frozen = i
		}
	}
	cli := freezeFollower(t, cluster, frozen)
	start := time.Now()
	if _, err := cli.Delete(t.Context(), a.Key); err != nil {
		t.Fatal(err)
	}
	r := campaign.DefaultRenewInterval(campaign.MinTTL)
	bound := campaign.GuardEvery(campaign.MinTTL) + 3*r
	err := awaitErr(t, held)
	fromWatch(t, err, campaign.ErrKeyDeleted)
	took := time.Since(start)
	t.Logf("noticed %s after the delete", took)
	if took > bound {
		t.Errorf("the leader's guard noticed its key deleted %s after the delete, want at most %s (its pace, the renewal that names the revision, the stall bound)", took, bound)
	}
}
