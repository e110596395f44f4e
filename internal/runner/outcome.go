package runner

import "fmt"

// Kind is how a run ended.
type Kind int

const (
	// ChildExited: the child ended by itself and nothing asks for another
	// term; Code is its status (128+N for signal N).
	ChildExited Kind = iota
	// Stopped: a stop signal ended the run; Code is the child's status, 0
	// when no child ran.
	Stopped
	// TimedOut: --timeout stopped the child.
	TimedOut
	// LostOnce: leadership was lost while the child ran under --once.
	LostOnce
	// NotLeader: --wait or --no-wait ended while another candidate led.
	NotLeader
	// Unreachable: etcd was not reached before --wait or --no-wait ended.
	Unreachable
	// Refused: etcd refused what the term needs (authentication,
	// permission); a retry would only be refused again.
	Refused
	// KeeperLost: the keeper process died; its child group was killed.
	KeeperLost
	// ExecFailed: the command could not be executed; Code is 126 or 127.
	ExecFailed
	// Failed: etcdlead itself failed in another way (a keeper that could
	// not be started, for instance).
	Failed
)

var kindNames = [...]string{"child-exited", "stopped", "timed-out", "lost-once", "not-leader",
	"unreachable", "refused", "keeper-lost", "exec-failed", "failed"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Outcome is how a run ended. It is an error so that it travels back
// through the CLI's action unchanged; Err is the one line to print, nil for
// an end that speaks for itself (the child's own status).
type Outcome struct {
	Kind Kind
	Code int // the child's status (ChildExited, Stopped) or 126/127 (ExecFailed)
	Err  error
}

func (o *Outcome) Error() string {
	if o.Err == nil {
		return o.Kind.String()
	}
	return o.Err.Error()
}

func (o *Outcome) Unwrap() error { return o.Err }

func end(k Kind, code int, err error) *Outcome { return &Outcome{Kind: k, Code: code, Err: err} }
