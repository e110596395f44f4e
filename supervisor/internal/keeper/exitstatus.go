package keeper

import "syscall"

// Exit codes, after timeout(1), env(1) and the shells, so that a child's
// status and the keeper's own failures read the same way they would under a
// shell.
const (
	ExitFailure    = 125 // the keeper (or etcdlead) itself failed
	ExitCannotExec = 126 // the command exists but cannot be executed
	ExitNotFound   = 127 // the command does not exist
	ExitSignalBase = 128 // ended by signal N: ExitSignalBase+N
)

// SignalExit is the exit code of a process ended by sig.
func SignalExit(sig syscall.Signal) int { return ExitSignalBase + int(sig) }

// ExitCode maps a wait status the way tini and the shells do: the child's own
// code, or SignalExit(N) when signal N ended it.
func ExitCode(ws syscall.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return SignalExit(ws.Signal())
	}
	return SignalExit(syscall.SIGKILL)
}
