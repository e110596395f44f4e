// Package supervisor runs the child command under a keeper: a small re-exec of
// etcdlead that owns the child's process group, enforces the fence deadline on
// a suspend-aware clock, and outlives a supervisor that is frozen or killed.
//
// What it promises: once the keeper has started the child, the child's
// process group is signalled no later than deadline-K-m and SIGKILLed no later
// than deadline-m (K = kill timeout, m = fence margin), measured on
// CLOCK_BOOTTIME, whatever happens to the supervisor. When the supervisor's
// pipe closes (the supervisor died, even by SIGKILL) the group is signalled at
// once. The keeper reports an exit status only after the whole group is gone.
//
// What it does not promise: processes that leave the group on purpose
// (setsid, daemons, docker run, ssh to another host) are out of its reach. A
// SIGKILL of the keeper itself leaves the direct child to its parent-death
// signal and the group to the supervisor's fallback kill.
//
// The package knows nothing of etcd.
package supervisor
