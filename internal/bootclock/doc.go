// Package bootclock reads and waits on the boot clock, which keeps counting
// while the machine is suspended, as a lease in etcd does: Now, the point
// every fence deadline is on; Timer, which wakes the keeper's loop;
// ThreadTimer, which fires a fence from a thread of its own; and Ticker,
// a leader's renewal tick. It runs in the supervisor and in the keeper.
package bootclock
