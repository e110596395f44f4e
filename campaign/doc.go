// Package campaign holds one candidate's terms in an etcd election, with the
// queue keys in the layout of etcd's concurrency.Election so that its
// observers (Election.Leader, etcdctl elect -l) see the same leader.
//
// A term is a fresh lease, a queue key and a lease sentinel on it, and a
// term record on no lease, created in one transaction; a guard that
// watches them from their creation; a wait that clears the records of
// ended terms and watches the nearest live older term, and reads again
// after every wake-up; then renewals whose send times give the fence
// deadline; and an end that deletes the record with the keys once the
// child is gone (docs/design.md, "One term, step by step").
//
// What it promises: Campaign returns a Term only after a read, taken after
// its last wake-up, showed its own keys intact and no valid queue key,
// sentinel or record of an older term. A record goes only when its own
// term ends, its child gone, or when a successor knows that child gone:
// its lease ended, by expiry or, after a raft leader change, its TTL ago
// (record.go). So no older term's child can still run, whatever the
// candidate remembers, also when etcd ended a lease early. Term.Deadline
// never runs later than etcd's expiry of the lease, as long as clocks
// advance at the same rate. Keys that are not exactly a term's
// (Layout.ValidQueueKey, Layout.ValidSentinel, Layout.ValidRecord) count
// for nothing.
//
// What it does not promise: a term's record deleted by hand, or its lease
// revoked by hand while etcd's raft term did not move since its grant, let
// a newcomer start before the old child is gone; those cases are bounded
// by the old leader noticing (docs/design.md, "What stays bounded"). The
// package starts no processes and speaks no gRPC: how its requests reach
// etcd through faults is internal/etcdwire's, at the cadences timing.go
// gives.
//
// It runs in the supervisor process (the etcdlead that campaigns), never in a keeper.
package campaign
