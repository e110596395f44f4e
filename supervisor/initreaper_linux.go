package supervisor

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/etcdlead/etcdlead/supervisor/internal/proctree"
)

// ReapAdopted makes this process reap, as init must, every process that the
// kernel hands it, when it is PID 1 of its PID namespace (a container's
// entrypoint): an orphan of anything in the container (a process started by
// `docker exec` whose parent ended) is re-parented to PID 1 and, once it
// exits, stays a zombie holding its pid until its parent reaps it. Keepers
// are left to the exec.Cmd that waits on them, and orphans of a dead keeper
// are reaped here too, which changes nothing for the term that waits for
// them: they are dead either way. Elsewhere it does nothing. The returned
// func stops it.
func ReapAdopted() (stop func()) {
	if os.Getpid() != 1 {
		return func() {}
	}
	// One pending SIGCHLD is enough: every wake-up looks at every child.
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-chld:
				reapExited()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(chld)
		close(done)
	}
}

// reapExited reaps the children that have exited and are no keepers. By
// pid, never wait4(-1), and under the keepers' lock, so that a keeper
// starting or a dead keeper's group being signalled (killOrphans) cannot
// interleave.
func reapExited() {
	keepers.Lock()
	defer keepers.Unlock()
	for _, pid := range proctree.Children(os.Getpid()) {
		if !isKeeper(pid) {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
	}
}
