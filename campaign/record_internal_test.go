package campaign

import (
	"math"
	"testing"
	"time"
)

// For every heartbeat and election timeout etcd accepts (the timeout at
// least five heartbeats, at most 50 s), the election timeout that the
// least TTL etcd grants implies is never below the one its raft runs
// with: ticks of the heartbeat, the timeout divided by it. etcd's least
// TTL is ⌈⌊3·ticks/2⌋·heartbeat⌉ seconds (server/etcdserver/server.go).
func TestElectionTimeoutForCoversEveryConfig(t *testing.T) {
	for tick := 1; tick <= 1000; tick += 3 {
		for election := 5 * tick; election <= 50000; election += 7 {
			ticks := election / tick
			runs := time.Duration(ticks*tick) * time.Millisecond
			minTTL := int64(math.Ceil((time.Duration(3*ticks/2) * time.Duration(tick) * time.Millisecond).Seconds()))
			if got := electionTimeoutFor(minTTL); got < runs {
				t.Fatalf("heartbeat %d ms, election timeout %d ms: etcd grants at least %d s, read as %s, below %s",
					tick, election, minTTL, got, runs)
			}
		}
	}
	// At etcd's defaults (100 ms, 1 s) it grants at least 2 s.
	if got := electionTimeoutFor(2); got < time.Second || got > 1500*time.Millisecond {
		t.Errorf("etcd's defaults read as an election timeout of %s", got)
	}
}
