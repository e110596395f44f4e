package e2e

import (
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// renewalMember waits until exactly one member of cluster has a
// LeaseKeepAlive stream open, the one candidate's, and returns it.
func renewalMember(t *testing.T, cluster *etcdtest.Cluster) int {
	t.Helper()
	for deadline := time.Now().Add(safety); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		on, total := -1, 0
		for i, m := range cluster.Members() {
			if n := m.OpenStreams(t, "LeaseKeepAlive"); n > 0 {
				on, total = i, total+n
			}
		}
		if total == 1 {
			return on
		}
	}
	t.Fatal("no member came to hold the leader's one renewal stream")
	return -1
}

// A frozen follower costs no leader its term, although it holds the
// leader's renewal stream: every candidate has all three endpoints, the
// member stays connected and answers nothing (SIGSTOP) for 3xTTL, and the
// two others keep a quorum. The leader's renewals must reach another
// member in time, so neither its fence nor a lost lease may show, and the
// waiter must not start.
func TestFrozenFollowerKeepsLeader(t *testing.T) {
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
	e := newEnv(t, cluster.Endpoints())
	c1 := e.start("c1", fast, e.probe())
	c1.out.waitFor(t, "c1", "ready", 0)
	frozen := renewalMember(t, cluster)
	// The stream is moved off the raft leader's member by moving the raft
	// leadership: this test is of a follower.
	cluster.MoveLeader(t, (frozen+1)%3)
	c2 := e.start("c2", fast, e.probe())
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
	from := c1.log.mark()
	cluster.Member(frozen).Freeze(t)
	// Three TTLs frozen; the duration is the fault, not a wait for an
	// event.
	time.Sleep(3 * 2 * time.Second)
	cluster.Member(frozen).Thaw(t)
	for _, bad := range []string{"fence", "lease lost", "renewal failed"} {
		if l, ok := c1.log.findFrom(bad, from); ok {
			t.Errorf("with a follower frozen the leader logged %q", l)
		}
	}
	if l, ok := c2.out.find("ready"); ok {
		t.Errorf("the waiter started while the leader's lease was renewed by two members: %q", l)
	}
	stopAll(t, e, c1, c2)
}
