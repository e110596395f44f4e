package e2e

import (
	"testing"
	"time"
)

// A leader behind a slow link keeps its term for as long as etcd renews
// its lease in time: a round trip of TTL/2 leaves its deadline well ahead
// of the fence point, so neither a fence nor a failed renewal may show, and
// the waiter, behind a fast link, must not start.
func TestSlowLinkKeepsLeader(t *testing.T) {
	skipIfShort(t)
	// Not in parallel: at a round trip of TTL/2 the arithmetic leaves the
	// leader little slack (T - K - m - r - RTT), which the scheduling of a
	// machine busy with other tests could take.
	_, e, p, c1, c2 := leaderPair(t, fast)
	from := c1.log.mark()
	p.Delay(500 * time.Millisecond) // a round trip of 1s, TTL/2
	// Three TTLs behind the slow link; the duration is the fault, not a
	// wait for an event.
	time.Sleep(3 * 2 * time.Second)
	for _, bad := range []string{"fence", "renewal failed", "lease lost"} {
		if l, ok := c1.log.findFrom(bad, from); ok {
			t.Errorf("behind a round trip of TTL/2 the leader logged %q", l)
		}
	}
	if l, ok := c2.out.find("ready"); ok {
		t.Errorf("the waiter started behind a leader whose lease etcd renewed: %q", l)
	}
	p.Delay(0)
	stopAll(t, e, c1, c2)
}

// Behind a round trip longer than the TTL no answer can keep the lease:
// the leader's fence stops its child before its lease can end, and the
// waiter starts only then (had it started earlier, the probe would have
// said OVERLAP and never "ready").
func TestSlowerLinkThanTTLFences(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	_, e, p, c1, c2 := leaderPair(t, fast)
	p.Delay(1500 * time.Millisecond) // a round trip of 3s, over the TTL of 2s
	c1.log.waitFor(t, "c1", "fence: lease deadline near", 0)
	c1.out.waitFor(t, "c1", "signal SIGTERM", 0)
	c2.out.waitFor(t, "c2", "ready", 0)
	p.Delay(0)
	stopAll(t, e, c1, c2)
}
