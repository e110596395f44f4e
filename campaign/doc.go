// Package campaign holds one candidate's terms in an etcd election, with the
// queue keys in the layout of etcd's concurrency.Election so that its
// observers (Election.Leader, etcdctl elect -l) see the same leader.
//
// A term is a fresh lease, a queue key and a lease sentinel created in one
// transaction, a guard that watches them from their creation, a wait that
// watches the nearest older term and reads again after every wake-up, and
// then renewals whose send times give the fence deadline
// (docs/design.md, "One term, step by step").
//
// What it promises: Campaign returns a Term only after a read, taken after
// its last wake-up, showed its own keys intact and no valid queue key or
// sentinel of an older term, and after every lease whose keys it saw go was
// gone; so no older term's keeper can still run a child (their fence fires
// before their lease can expire). Term.Deadline never runs later than etcd's
// expiry of the lease, as long as clocks advance at the same rate. Keys that
// are not exactly a term's (Layout.ValidQueueKey, Layout.ValidSentinel)
// count for nothing.
//
// What it does not promise: a lease revoked by hand, or a live term's
// sentinel and queue key both deleted by hand, are gone at once, so nothing
// can wait for the old child; those cases are bounded by the old leader
// noticing (docs/design.md, "What stays bounded"). The package starts no
// processes.
//
// It runs in the supervisor process (the etcdlead that campaigns), never in a keeper.
package campaign
