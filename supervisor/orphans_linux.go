package supervisor

import (
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/supervisor/internal/proctree"
)

// orphanWait bounds the supervisor's wait for what a dead keeper left.
// SIGKILL ends a process at once unless it sleeps uninterruptibly in the
// kernel (a hung NFS mount, say); such a process runs no more code of its
// own, and the term ends without waiting for it.
const orphanWait = 10 * time.Second

// orphanPoll is how often the supervisor looks for orphans re-parented to it
// while it waits: nothing tells it of one.
const orphanPoll = 10 * time.Millisecond

var (
	subreaper    sync.Once
	subreaperErr error // said when a keeper dies: its orphans went elsewhere
)

// becomeSubreaper makes this process, the supervisor, a child subreaper
// before its first keeper starts: if a keeper dies, what it started lands
// here rather than on init, where nobody would stop it.
func becomeSubreaper() {
	subreaper.Do(func() {
		subreaperErr = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	})
}

// orphans are the processes dead keepers left to this process.
type orphans struct{ sw *proctree.Sweep }

// killOrphans SIGKILLs the child's group (pgid 0: none known), then every
// child of this process that is not a live keeper, with everything below
// it. Keepers are left alone, with their trees: they are another term's.
func killOrphans(pgid int) *orphans {
	if pgid > 0 {
		// Checked and signalled under the keepers' lock, so that nothing
		// reaps the group's leader in between (ReapAdopted) and frees its
		// pid for reuse.
		keepers.Lock()
		if isOwnOrphan(pgid) {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		keepers.Unlock()
	}
	o := &orphans{sw: proctree.NewSweep(os.Getpid(), syscall.SIGKILL, 0)}
	o.sw.Exclude = isKeeper
	o.sweep()
	return o
}

func (o *orphans) sweep() {
	keepers.Lock()
	defer keepers.Unlock()
	_, _ = o.sw.Run(bootclock.Now() + proctree.WalkBudget)
}

// isOwnOrphan reports whether pid is a child of this process and no
// keeper: the direct child of a dead keeper, which the keeper never reaped
// (it reaps it last), so its pid, its group's id, is not yet free for
// reuse. A group is signalled only then; else the sweep alone reaches what
// is left. Called with keepers locked.
func isOwnOrphan(pid int) bool {
	st, err := proctree.ReadStat(pid)
	return err == nil && st.PPid == os.Getpid() && !isKeeper(pid)
}

// wait sweeps and reaps until no orphan is left, or bound passes; it
// returns how many are left. Only a look that finds no orphan at all ends
// it: one that reaped something may have run while the reaped process's
// children were on their way here.
func (o *orphans) wait(bound time.Duration) int {
	defer o.sw.Close()
	deadline := time.Now().Add(bound)
	for {
		left, reaped := o.reap()
		switch {
		case left == 0 && reaped == 0:
			return 0
		case left > 0 && !time.Now().Before(deadline):
			return left
		case left > 0:
			time.Sleep(orphanPoll)
		}
		o.sweep()
	}
}

// reap reaps the orphans that have ended; it returns how many still run
// and how many it reaped. By pid, never wait4(-1): exec.Cmd waits on the
// keepers in this process.
func (o *orphans) reap() (left, reaped int) {
	keepers.Lock()
	var pids []int
	for _, pid := range proctree.Children(os.Getpid()) {
		if !isKeeper(pid) {
			pids = append(pids, pid)
		}
	}
	keepers.Unlock()
	for _, pid := range pids {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		switch {
		case err == nil && got == 0:
			left++
		case err == nil:
			reaped++
		}
	}
	return left, reaped
}
