// Package model is an exhaustive check, in tests only, of the term protocol
// of docs/design.md ("One term, step by step"): every interleaving, within
// stated bounds, of candidates, etcd and an operator, searched for a state
// in which two children are alive at once.
//
// It models two protocols. "old" is main's today: queue key and sentinel on
// the term's lease, a waiter's hold after it sees the sentinel ahead go
// after a raft leader change (earlyEnd, holdUntil), the sit-out after an
// early end of a candidate's own term (sitOut), and the replay of a
// candidate that had a term before (replay; "An early end after a raft
// leader change"). "new" adds a term record per term, on no lease, that
// every start read waits for and that only two things remove: the term's
// own end, once its child is gone, and a waiter that saw its lease gone
// and, after a raft change since the record's grant, held it for the
// record's TTL plus μ. etcd 3.6 revokes a lease early when a replaced raft
// leader resumes (the sweep): the search finds the hole this leaves in
// "old", a candidate that never saw the swept term starting beside its
// child, and none in "new".
//
// What is modelled: ticks of one clock shared by every process and etcd;
// leases that etcd ends at their expiry or any tick later, never sooner;
// a fence at each term's deadline (the send time of its last credited
// renewal plus the TTL, margin m = 0); renewals at any time, credited by a
// stale raft leader up to ET after a sweep; raft term changes; sweeps of
// leases granted in an older raft term; supervisors killed (and restarted
// with no memory, in the same step: a killed process not yet back does
// what an idle one does, nothing), frozen and thawed; children that take
// any time up to their fence to stop; guards that hear of a lost key any
// time later; reads at any time, as watches that break or wake for nothing
// allow; an old waiter's watch that misses a delete (a switch); and an
// operator who deletes keys, revokes leases or deletes or rewrites records
// by hand (switches). What is not: more than one holder (--holders N,
// slots), the pause, resign requests, --run-id records, the guard's stall
// questions, compaction of etcd's history, clock rates (the margin's job),
// keys that are not a term's, and a waiter clearing several ended records
// at once (it clears them one at a time, in any order; each hold covers its
// own term only). The old protocol's replay runs with the enqueue and holds
// from then, not from an own early end seen before (the safe side).
//
// Time has no horizon: a state keeps its timers as ticks from now, the
// model being the same at every tick, so the search covers runs of any
// length. The bounds are the rest: candidates, the TTL T (2 ticks, ET = 1;
// a TTL of 3 multiplies the states, and fits the time a test may take only
// with fewer grants), leases granted, raft changes, sweeps, kills and
// freezes, operator steps.
// TestNewProtocolKeepsThePromise searches two candidates with three grants,
// one raft change, one sweep, one kill or freeze and one hand delete of a
// queue key or sentinel, and three candidates with three grants, one raft
// change and one sweep (under -short: the first, with two grants). Each
// search logs its bounds and the states it visited.
//
// States that no step can tell apart are one: candidates are
// interchangeable and so are lease ids, revisions count by rank, and
// fields nothing reads again are cleared (canon_test.go). A state from
// which no start can come beside another child (the grants spent, one term
// at most that may still start or has a child) is not expanded.
//
// Why a breadth-first search of its own and not pgregory.net/rapid: rapid
// samples interleavings, and a sampled pass says nothing of the ones it
// missed. This search visits every state reachable within the bounds
// exactly once, runs the same way every time, and finds a shortest
// counterexample first, which is the readable one. It runs on one
// goroutine, where the race detector has nothing to find: the functions it
// runs for every state are //go:norace, so that `go test -race` costs it
// little.
package model
