package model

import (
	"slices"
	"strings"
	"testing"
)

// oldHole is the old protocol with what its hole needs and the faults
// that might make a shorter path to it, every wake-up heard: the hole
// found is not a watch that broke (TestOldProtocolMissedWakeUpHole).
var oldHole = config{proto: oldProtocol, candidates: 3, ttl: 2, grants: 4, raftChanges: 1, sweeps: 1, faults: 1, hands: 1, handKeys: true}

// oldHoleTrace is the shortest counterexample in the old protocol. B's
// grant comes before the sweep, its campaign transaction just after: it
// never saw A's term, whose sentinel went before B looked, and a first
// term has nothing to replay. A's child runs on until its fence at 2.
var oldHoleTrace = []string{
	"t=0 A grant L1 (raft term 1, deadline 2)",
	"t=0 A enqueue L1",
	"t=0 A startRead L1: nothing older",
	"t=0 A start L1 (fence 2)",
	"t=0 B grant L2 (raft term 1, deadline 2)",
	"t=0 etcd raftChange to raft term 2",
	"t=0 etcd sweep L1 (granted in raft term 1)",
	"t=0 B enqueue L2",
	"t=0 B startRead L2: nothing older",
	"t=0 B start L2 (fence 2) beside the child of L1 (fence 2): two children alive",
}

func TestOldProtocolFirstCampaignHole(t *testing.T) {
	r := explore(oldHole)
	t.Logf("%v: %d states, depth %d, %v", oldHole, r.states, r.depth, r.took)
	logTrace(t, r.trace)
	if r.trace == nil {
		t.Fatal("no counterexample: the old protocol's hole after a sweep was not found")
	}
	if !slices.Equal(r.trace, oldHoleTrace) {
		t.Errorf("shortest counterexample:\n%s\nwant:\n%s", strings.Join(r.trace, "\n"), strings.Join(oldHoleTrace, "\n"))
	}
}

// TestOldProtocolMissedWakeUpHole is the old protocol's other way into the
// same hole: a waiter that was queued behind the swept term, and whose
// watch broke as the raft leader changed, reads again after the sweep,
// finds nothing ahead, and has nothing that says a term went.
func TestOldProtocolMissedWakeUpHole(t *testing.T) {
	cfg := oldHole
	cfg.missWakeUps = true
	r := explore(cfg)
	t.Logf("%v: %d states, depth %d, %v", cfg, r.states, r.depth, r.took)
	logTrace(t, r.trace)
	if r.trace == nil {
		t.Fatal("no counterexample with missed wake-ups")
	}
	enqueued := slices.Index(r.trace, "t=0 B enqueue L2")
	swept := slices.IndexFunc(r.trace, func(l string) bool { return strings.Contains(l, " etcd sweep ") })
	if enqueued < 0 || swept < enqueued {
		t.Errorf("want B queued before the sweep")
	}
}

// promise is the new protocol's searches, which must find no
// counterexample: two candidates with every fault but the hand edits of
// records and hand revokes, and three grants, so that a candidate has a
// second term (two under -short); and, in full, three candidates with
// sweeps but no other fault.
func promise(short bool) []search {
	every := config{proto: newProtocol, candidates: 2, ttl: 2, grants: 3, raftChanges: 1, sweeps: 1, faults: 1, hands: 1, handKeys: true}
	if short {
		every.grants = 2
		return []search{{"every fault", every}}
	}
	three := config{proto: newProtocol, candidates: 3, ttl: 2, grants: 3, raftChanges: 1, sweeps: 1}
	return []search{{"every fault", every}, {"three candidates", three}}
}

// search is a named search.
type search struct {
	name string
	cfg  config
}

func TestNewProtocolKeepsThePromise(t *testing.T) {
	for _, x := range promise(testing.Short()) {
		t.Run(x.name, func(t *testing.T) {
			r := explore(x.cfg)
			t.Logf("%v: %d states, depth %d, %v", x.cfg, r.states, r.depth, r.took)
			if r.trace != nil {
				t.Fatalf("counterexample:\n%s", strings.Join(r.trace, "\n"))
			}
		})
	}
}

// TestNewProtocolBounds finds the cases the new protocol bounds and does
// not exclude (docs/design.md, "What stays bounded"): a record deleted or
// rewritten by hand, a lease revoked by hand.
func TestNewProtocolBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   kind
		set  func(*config)
	}{
		{"handEditRecord", kHandEditRecord, func(c *config) { c.handEditRecord = true }},
		{"handRevoke", kHandRevoke, func(c *config) { c.handRevoke = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config{proto: newProtocol, candidates: 2, ttl: 2, grants: 2, raftChanges: 1, sweeps: 1, hands: 1}
			tc.set(&cfg)
			r := explore(cfg)
			t.Logf("%v: %d states, depth %d, %v", cfg, r.states, r.depth, r.took)
			logTrace(t, r.trace)
			if r.trace == nil {
				t.Fatalf("no counterexample with %s", tc.op)
			}
			if !slices.ContainsFunc(r.trace, func(l string) bool { return strings.Contains(l, " operator "+tc.op.String()+" ") }) {
				t.Errorf("the counterexample has no %s", tc.op)
			}
		})
	}
}

func logTrace(t *testing.T, trace []string) {
	t.Helper()
	for _, l := range trace {
		t.Log("  " + l)
	}
}
