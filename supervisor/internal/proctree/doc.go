// Package proctree finds and signals a child's processes: its cgroup
// (cgroup_linux.go), where the kernel keeps every process it forks, and,
// without one or besides it, the tree below a process walked through /proc
// with each process held by a pidfd (proctree_linux.go). It runs in the
// keeper, which stops and fences the tree, and in the supervisor, which
// fences it too and kills what a dead keeper left.
package proctree

import "time"

// WalkBudget bounds one stretch of walking the process tree: a tree that
// forks faster than it can be walked must not hold a loop away from its
// fence timer and its pipe. A walk cut short goes on at the loop's next
// turn, after whatever fell due meanwhile.
const WalkBudget = 20 * time.Millisecond

// FenceWalk bounds one walk of a fence's SIGKILL, on a thread of its own
// apart from every loop, so it may take longer than WalkBudget.
const FenceWalk = 10 * WalkBudget
