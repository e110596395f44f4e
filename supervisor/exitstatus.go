package supervisor

import (
	"syscall"

	"github.com/etcdlead/etcdlead/supervisor/internal/keeper"
)

// Exit codes, after timeout(1), env(1) and the shells (the keeper's, which
// reports them).
const (
	ExitFailure    = keeper.ExitFailure    // the keeper (or etcdlead) itself failed
	ExitCannotExec = keeper.ExitCannotExec // the command exists but cannot be executed
	ExitNotFound   = keeper.ExitNotFound   // the command does not exist
	ExitSignalBase = keeper.ExitSignalBase // ended by signal N: ExitSignalBase+N
)

// SignalExit is the exit code of a process ended by sig.
func SignalExit(sig syscall.Signal) int { return keeper.SignalExit(sig) }

// Reason says why the child's group ended.
type Reason = keeper.Reason

const (
	ReasonExited     = keeper.ReasonExited     // the child ended by itself
	ReasonStopped    = keeper.ReasonStopped    // the supervisor asked
	ReasonFenced     = keeper.ReasonFenced     // the lease deadline came close
	ReasonOrphaned   = keeper.ReasonOrphaned   // the supervisor's pipe closed
	ReasonKeeperLost = keeper.ReasonKeeperLost // the keeper died without a report
)
