package campaign_test

import (
	"testing"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// The guard's backstop for a watch that stalls silently, a progress
// request on the term's stream, reads nothing: at the shortest TTL, in the
// time a leader makes eight renewals at its cadence of T/10, the guard
// reads its keys not once (docs/design.md, step 3).
func TestGuardRereadPace(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	cluster := etcdtest.Start(t, etcdtest.Options{})
	var sent wire
	f := newFixture(t, wiredClient(t, cluster, &sent))
	f.ttl = campaign.MinTTL
	var n tally
	f.renewed = n.hear
	a := f.lead()
	sent.record(true)
	held := hold(a)
	atLeast(t, &n.ok, 8, held, "renewals")
	r := 0
	for _, m := range sent.record(false) {
		if m == "/etcdserverpb.KV/Txn" {
			r++
		}
	}
	if r != 0 {
		t.Errorf("the guard read its keys %d times during %d renewals at TTL %s, want none", r, n.ok.Load(), f.ttl)
	}
}
