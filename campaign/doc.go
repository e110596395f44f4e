// Package campaign holds one candidate's terms in an etcd election, with the
// key layout of etcd's concurrency.Election so that its observers
// (Election.Leader, etcdctl elect -l) see the same leader.
//
// A term is DESIGN.md steps 1-7: a fresh lease, one transaction that puts
// the candidate's key and reads the queue, a wait on the nearest predecessor
// only, a barrier until every predecessor's lease is gone, a confirmation,
// and then renewals whose send times give the fence deadline.
//
// What it promises: Campaign returns a Term only when no key with a lower
// create revision exists and every lease that a predecessor held is gone, so
// no predecessor's keeper can still run a child (their fence fires before
// their lease can expire). Term.Deadline never runs later than etcd's expiry
// of the lease, as long as clocks advance at the same rate.
//
// What it does not promise: a lease revoked by hand is gone at once, so the
// barrier cannot wait for the old child; that case is bounded by the old
// leader noticing its deleted key. The package starts no processes.
package campaign
