package supervisor

import "github.com/etcdlead/etcdlead/supervisor/internal/keeper"

// Reason says why the child's group ended.
type Reason = keeper.Reason

const (
	ReasonExited     = keeper.ReasonExited     // the child ended by itself
	ReasonStopped    = keeper.ReasonStopped    // the supervisor asked
	ReasonFenced     = keeper.ReasonFenced     // the lease deadline came close
	ReasonOrphaned   = keeper.ReasonOrphaned   // the supervisor's pipe closed
	ReasonKeeperLost = keeper.ReasonKeeperLost // the keeper died without a report
)
