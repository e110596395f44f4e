package runner

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/internal/health"
	"github.com/etcdlead/etcdlead/internal/ops"
)

// Notify is --notify: a command told of each change of this candidate's
// role, as keepalived's notify and Patroni's on_role_change are
// (docs/operating.md, "Telling others of a role change").
type Notify struct {
	// Command is run for each change: its Shell, Timeout and keeper
	// settings, and in Env the environment it inherits. Each run adds the
	// role as $1 and the change's variables.
	Command health.Command
	// run, if set, runs the command instead of Command, and seen hears
	// each role set: for tests.
	run  func(args, env []string) health.Result
	seen func(role string)
}

// The variables that tell the --notify command of the change, besides
// EnvName, EnvID and EnvRev, which mean what they mean to the child.
const (
	EnvRole   = "ETCDLEAD_ROLE"
	EnvReason = "ETCDLEAD_REASON"
)

// notifyVars are set by each run: an inherited value of one would only
// hide the run's own.
var notifyVars = []string{EnvRole, EnvReason, EnvName, EnvID, EnvRev}

// notifyArg0 is the command's $0, so that the role is its $1.
const notifyArg0 = "etcdlead-notify"

// note is one change of role to tell.
type note struct {
	role, reason string
	rev          int64 // the term's fencing token; 0 for none
}

// notifier runs the --notify command from a goroutine of its own, so that
// no step of a term (a stop, the fence, the revoke, a handoff) ever waits
// for it. It tells one note at a time, in order: a note set while a run is
// under way waits for that run to end, never cutting it short, and
// replaces any note that waits already, so the last note told is always
// the newest role (docs/design.md, "Role-change notification").
type notifier struct {
	run  func(note) health.Result
	seen func(role string) // nil but in tests
	log  hclog.Logger
	mon  *ops.Monitor
	wake chan struct{} // a note was set, or close was called
	done chan struct{} // the loop has ended: no run is under way or left

	mu sync.Mutex
	// role is the newest role set. Before any it is follower, never told:
	// a candidate that has not led has nothing for the command to undo.
	role string
	// term is the fencing token of the term the leader role is about, for
	// the note that ends that role.
	term int64
	// told is the role of the last run started, and spoke whether one
	// was: what the command knows.
	told    string
	spoke   bool
	pending *note
	closing bool
}

// startNotifier starts the notifier of --notify, or returns nil without
// it; a nil notifier's methods do nothing.
func (r *Runner) startNotifier() *notifier {
	nc := r.cfg.Notify
	if nc == nil {
		return nil
	}
	run := nc.run
	if run == nil {
		run = func(args, env []string) health.Result {
			c := nc.Command
			c.Args, c.Env = args, env
			// Never cut short: not by the run's end, nor by a newer note.
			return c.Check(context.Background(), nil)
		}
	}
	base := slices.DeleteFunc(slices.Clone(nc.Command.Env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(notifyVars, name)
	})
	n := &notifier{log: r.log, mon: r.mon, seen: nc.seen, role: ops.HookFollower, told: ops.HookFollower,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	n.run = func(x note) health.Result {
		return run([]string{notifyArg0, x.role}, append(slices.Clip(base), r.noteEnv(x)...))
	}
	go n.loop()
	return n
}

// noteEnv is what the command learns of the change besides its role.
func (r *Runner) noteEnv(x note) []string {
	rev := ""
	if x.rev != 0 {
		rev = strconv.FormatInt(x.rev, 10)
	}
	return []string{EnvRole + "=" + x.role, EnvName + "=" + r.cfg.Campaign.Layout.Name(), EnvID + "=" + r.cfg.Campaign.ID,
		EnvRev + "=" + rev, EnvReason + "=" + x.reason}
}

// set makes role the newest, for reason; rev is the won term's fencing
// token (leader). A role equal to the newest is no change.
func (n *notifier) set(role, reason string, rev int64) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.setLocked(role, reason, rev)
}

func (n *notifier) setLocked(role, reason string, rev int64) {
	if role == n.role || n.closing {
		return
	}
	if n.seen != nil {
		n.seen(role)
	}
	if role == ops.HookLeader {
		n.term = rev
	} else {
		// A leader role ends with this note: it tells of that term.
		rev, n.term = n.term, 0
	}
	n.role = role
	if p := n.pending; p != nil {
		n.pending = nil
		n.mon.Hooked(p.role, ops.HookReplaced)
		n.log.Info("--notify: a role replaced by a newer one before its command ran", "role", p.role, "by", role)
	}
	switch {
	case role == ops.HookFollower && n.told != ops.HookLeader, role == ops.HookStopped && !n.spoke:
		// The command was not told of the term that ended: it has
		// nothing to undo.
		return
	}
	n.pending = &note{role: role, reason: reason, rev: rev}
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// close tells the command that etcdlead stops, for reason, if it was told
// anything before, and returns once no run of the command is left: after
// at most the run under way and that one, each bounded by its timeout.
func (n *notifier) close(reason string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.setLocked(ops.HookStopped, reason, 0)
	n.closing = true
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
	<-n.done
}

func (n *notifier) loop() {
	defer close(n.done)
	for {
		n.mu.Lock()
		x, closing := n.pending, n.closing
		if x != nil {
			n.pending = nil
			n.told, n.spoke = x.role, true
		}
		n.mu.Unlock()
		switch {
		case x != nil:
			n.tell(*x)
		case closing:
			return
		default:
			<-n.wake
		}
	}
}

// tell runs the command for x, and logs and counts how it ended: a
// failure is one warning, with what the command wrote.
func (n *notifier) tell(x note) {
	res := n.run(x)
	result := ops.HookOK
	switch {
	case res.TimedOut:
		result = ops.HookTimeout
	case !res.OK:
		result = ops.HookFailed
	}
	n.mon.Hooked(x.role, result)
	args := []any{"role", x.role, "reason", x.reason, "took", res.Took.Round(time.Millisecond)}
	// The log's records keep a value on one line (internal/logbuf).
	if out := strings.TrimRight(res.Output, "\n"); out != "" {
		args = append(args, "output", out)
	}
	if result == ops.HookOK {
		n.log.Info("--notify told the role", args...)
		return
	}
	n.log.Warn("--notify failed", append(args, "result", res.Summary())...)
}
