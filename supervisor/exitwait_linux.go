package supervisor

import (
	"os"

	"golang.org/x/sys/unix"
)

// awaitExit returns once process pid has ended, waiting in the runtime's
// poller on a pidfd rather than in the kernel: etcdlead runs on one P
// (main.go), and a wait blocked in the kernel holds it, so that nothing
// else runs until the runtime takes it back. The process is left for the
// caller to reap. Where a pidfd cannot be had or polled it returns at once
// and the caller's own wait blocks instead.
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		return err != nil || info.Signo != 0
	})
}
