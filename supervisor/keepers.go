package supervisor

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// keepers are this process's live keeper processes. When a keeper dies, its
// orphans become this process's children beside the other keepers, and the
// keepers are the ones to leave alone: exec.Cmd waits on them.
var keepers = struct {
	sync.Mutex
	procs map[int]*keeperProc
}{procs: make(map[int]*keeperProc)}

// start starts the keeper process and registers it in one step, so that no
// look for orphans takes it for one. The keeper goes into its term's keeper
// cgroup, where there is one, so that a later etcdlead can tell that it
// still runs (removeStale); a keeper that cannot be started there starts
// beside its supervisor.
func (k *keeperProc) start(spec Spec, ctrlR, statW *os.File) error {
	keepers.Lock()
	defer keepers.Unlock()
	var err error
	if k.cg.keeper != "" {
		var fd int
		if fd, err = unix.Open(string(k.cg.keeper), unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			k.cmd = keeperCmd(k.path, spec, ctrlR, statW, k.cg, fd)
			err = k.cmd.Start()
			unix.Close(fd)
		}
	}
	if k.cg.keeper == "" || err != nil {
		k.cmd = keeperCmd(k.path, spec, ctrlR, statW, k.cg, -1)
		if err = k.cmd.Start(); err != nil {
			return err
		}
	}
	keepers.procs[k.cmd.Process.Pid] = k
	return nil
}

// wait waits for the keeper process and unregisters it.
func (k *keeperProc) wait() error {
	err := k.cmd.Wait()
	keepers.Lock()
	defer keepers.Unlock()
	// Its pid may be a new keeper's already.
	if keepers.procs[k.cmd.Process.Pid] == k {
		delete(keepers.procs, k.cmd.Process.Pid)
	}
	return err
}

// isKeeper is called with keepers locked.
func isKeeper(pid int) bool {
	_, ok := keepers.procs[pid]
	return ok
}
