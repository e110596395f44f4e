// Package exitcode holds every exit code etcdlead and its keeper give of
// their own, after timeout(1), env(1), flock(1), the shells and tini: the
// one home of the numbers in README.md's "Exit codes" table. Which outcome
// gets which code is decided in one function, internal/cli/exitcode.go's
// exitCode; the keeper uses Failure, CannotExec and NotFound. A child's own
// code, or Signal(N) for signal N, passes through unchanged.
//
// It runs in both processes and imports nothing of etcdlead's.
package exitcode

import "syscall"

const (
	OK         = 0
	NoLeader   = 3   // status, resign: no leader
	Conflict   = 75  // not leader when --wait ended (--conflict-exit-code's default)
	LostOnce   = 76  // --once: leadership lost while the command ran
	Timeout    = 124 // --timeout: the command ran too long
	Failure    = 125 // etcdlead or its keeper failed: flags, configuration, etcd
	CannotExec = 126 // the command exists but cannot be executed
	NotFound   = 127 // the command does not exist
	SignalBase = 128 // ended by signal N: SignalBase+N
)

// Signal is the exit code of a process ended by sig.
func Signal(sig syscall.Signal) int { return SignalBase + int(sig) }

// Of maps a wait status the way tini and the shells do: the process's own
// code, or Signal(N) when signal N ended it.
func Of(ws syscall.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return Signal(ws.Signal())
	}
	return Signal(syscall.SIGKILL)
}
