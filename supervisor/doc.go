// Package supervisor runs the child command under a keeper: a small process
// that owns the child's process group and its whole process tree, enforces
// the fence deadline on a suspend-aware clock, and outlives a supervisor that
// is frozen or killed (docs/design.md, "The keeper"). This package is the
// supervisor process's side: it prepares the term's cgroups, starts and
// talks to keepers, fences the child itself too, and kills what a dead
// keeper left. The keeper process is internal/keeper; what both processes
// do to a process tree is internal/proctree. The keeper is its own
// binary, KeeperName (cmd/etcdlead-keeper), found beside the executable or in
// KeeperDir and checked for this package's protocol before any child starts;
// without one, the executable re-executes itself in its keeper mode
// (KeeperArg), which its main must dispatch to RunKeeper.
//
// What it promises: the keeper starts the child only before its fence point
// (deadline-K-m on CLOCK_BOOTTIME), or not at all (ErrPastFence). Once the
// child runs, its cgroup (with Contain's cgroup containment), its process
// group and every descendant of the keeper, in whatever group or session,
// are signalled no later than deadline-K-m and SIGKILLed no later than
// deadline-m (K = kill timeout, m = fence margin), whatever happens to the
// supervisor; and by the supervisor itself, at deadline-m, when the keeper
// has not reported them gone by then (stopped, starved, or dead). When the
// supervisor's pipe closes (the supervisor died, even by SIGKILL) they are
// signalled at once. No signal waits on a log write: both processes log
// through a bounded asynchronous writer. The keeper is a child subreaper,
// so orphans below it stay its own; it reports an exit status only once
// the child's cgroup holds no live process and it has no child left at
// all. A keeper SIGKILLed itself leaves the direct child to its
// parent-death signal and the rest to the supervisor, a subreaper too,
// which kills and reaps everything the keeper left before it publishes the
// result. A standby keeper that died before its term is replaced by a
// fresh one. No cgroup is left behind: a term's are removed once empty, and
// those of a dead supervisor by the next one to start beside it.
//
// What it does not promise: processes started on the child's behalf by
// another daemon (docker run, systemd-run, ssh to another host) are not the
// keeper's descendants and are out of its reach. Without a cgroup, a
// descendant that leaves the child's group and forks faster than the tree
// can be walked may outrun the fence. With the supervisor frozen and its
// keeper killed, or both stopped, nobody fences until the supervisor runs
// again. The process that uses this
// package must start no children of its own besides keepers: after a
// keeper's death it kills every child that is not a live keeper.
//
// The package knows nothing of etcd.
package supervisor
