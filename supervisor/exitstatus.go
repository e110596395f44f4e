package supervisor

import "syscall"

// ExitCode maps a wait status the way tini and the shells do: the child's own
// code, or 128+N when signal N ended it.
func ExitCode(ws syscall.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return 128 + int(syscall.SIGKILL)
}
