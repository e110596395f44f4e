package signals

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// Phase is where the supervisor is when a signal arrives.
type Phase int

const (
	// Campaigning: no child; campaigning for leadership.
	Campaigning Phase = iota + 1
	// BackingOff: no child; waiting before the next campaign.
	BackingOff
	// Leading: the child runs and no stop signal has been obeyed yet. A
	// stop for lost leadership or --timeout leaves the phase Leading: a stop
	// signal after it is obeyed as a first one.
	Leading
	// Stopping: the child runs and a stop signal was already obeyed.
	Stopping
	// Holding: the child ended; leadership is kept for --hold-at-least.
	Holding
	endPhase
)

var phaseNames = [endPhase]string{
	Campaigning: "campaigning",
	BackingOff:  "backing-off",
	Leading:     "leading",
	Stopping:    "stopping",
	Holding:     "holding",
}

func (p Phase) String() string {
	if p < Campaigning || p >= endPhase {
		return fmt.Sprintf("Phase(%d)", int(p))
	}
	return phaseNames[p]
}

// Action is what the supervisor does with a caught signal. The zero value
// is no action, so that a phase left out of the table shows in its tests.
type Action int

const (
	// Exit: no child runs; stop campaigning, backing off or holding,
	// revoke, exit 0.
	Exit Action = iota + 1
	// StopChild: send the signal to the child's group; SIGKILL after
	// --kill-timeout.
	StopChild
	// KillChild: SIGKILL the child's group at once.
	KillChild
	// Forward: pass the signal to the child's group.
	Forward
	// IgnoreNoChild: log and drop; there is no child to pass it to.
	IgnoreNoChild
	// IgnoreStopped: log and drop. A stopped supervisor would stop
	// renewing its lease; while its child runs, the fence would then kill
	// the child.
	IgnoreStopped
	endAction
)

var actionNames = [endAction]string{
	Exit:          "exit",
	StopChild:     "stop-child",
	KillChild:     "kill-child",
	Forward:       "forward",
	IgnoreNoChild: "ignore-no-child",
	IgnoreStopped: "ignore-stopped",
}

func (a Action) String() string {
	if a < Exit || a >= endAction {
		return fmt.Sprintf("Action(%d)", int(a))
	}
	return actionNames[a]
}

// Reason is the log message for an ignore action, "" for any other: the
// actions that do something are logged by what they do.
func (a Action) Reason() string {
	switch a {
	case IgnoreNoChild:
		return "signal ignored: no child runs"
	case IgnoreStopped:
		return "signal ignored: a stopped supervisor would lose its lease"
	}
	return ""
}

// kind is what a caught signal is, whatever the phase.
type kind int

const (
	stop       kind = iota + 1 // asks etcdlead to end
	message                    // meant for the child
	jobControl                 // would stop the supervisor itself
	endKind
)

// table is every signal etcdlead catches.
var table = map[syscall.Signal]kind{
	syscall.SIGTERM:  stop,
	syscall.SIGINT:   stop,
	syscall.SIGHUP:   message,
	syscall.SIGUSR1:  message,
	syscall.SIGUSR2:  message,
	syscall.SIGQUIT:  message,
	syscall.SIGWINCH: message,
	syscall.SIGTSTP:  jobControl,
	syscall.SIGTTIN:  jobControl,
	syscall.SIGTTOU:  jobControl,
}

// decisions is what a signal of each kind does in each phase. Only a
// second stop signal escalates: a stop for lost leadership or --timeout
// is not one the user asked for twice.
var decisions = [endKind][endPhase]Action{
	stop: {
		Campaigning: Exit, BackingOff: Exit, Holding: Exit,
		Leading: StopChild, Stopping: KillChild,
	},
	message: {
		Campaigning: IgnoreNoChild, BackingOff: IgnoreNoChild, Holding: IgnoreNoChild,
		Leading: Forward, Stopping: Forward,
	},
	jobControl: {
		Campaigning: IgnoreStopped, BackingOff: IgnoreStopped, Holding: IgnoreStopped,
		Leading: IgnoreStopped, Stopping: IgnoreStopped,
	},
}

// Decide is what the supervisor does with sig in phase p. Signals that
// Catch does not catch never arrive; for them Decide answers IgnoreStopped,
// which does nothing but log. p must be one of the Phase constants.
func Decide(p Phase, sig os.Signal) Action {
	if p < Campaigning || p >= endPhase {
		panic("signals: Decide in unknown " + p.String())
	}
	s, _ := sig.(syscall.Signal)
	k, ok := table[s]
	if !ok {
		return IgnoreStopped
	}
	return decisions[k][p]
}

// Catcher delivers caught signals on C until Stop.
type Catcher struct {
	C    <-chan os.Signal
	ch   chan os.Signal
	pipe chan os.Signal
}

// Catch starts catching every signal in the table. Call it before starting
// anything that a signal should reach, so none is lost.
func Catch() *Catcher {
	ch := make(chan os.Signal, 16)
	sigs := make([]os.Signal, 0, len(table))
	for s := range table {
		sigs = append(sigs, s)
	}
	signal.Notify(ch, sigs...)
	return &Catcher{C: ch, ch: ch, pipe: dropSIGPIPE()}
}

// dropSIGPIPE keeps a closed stdout or stderr (a log reader that died) from
// killing the process: Go raises SIGPIPE for a write to fd 1 or 2 that fails
// with EPIPE, and a keeper killed that way would orphan the child. The
// signal is dropped without a log line, which would only raise it again.
func dropSIGPIPE() chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGPIPE)
	go func() {
		for range ch {
		}
	}()
	return ch
}

// Fake returns a Catcher fed by the caller, for tests that send signals
// without kill(2).
func Fake(ch chan os.Signal) *Catcher { return &Catcher{C: ch} }

// Stop ends delivery and restores default handling. A process that exits
// next has no use for it.
func (c *Catcher) Stop() {
	if c.ch != nil {
		signal.Stop(c.ch)
	}
	if c.pipe != nil {
		signal.Stop(c.pipe)
		close(c.pipe)
	}
}

// Absorb catches every signal in the table for the keeper, which takes
// orders from its pipe alone. Catching, unlike ignoring, lets exec give the
// child default dispositions.
func Absorb() *Catcher { return Catch() }

// CatchStop catches only the stop signals, SIGTERM and SIGINT, for the
// commands that run no child (status --watch): every other signal keeps
// its default, so SIGHUP still ends them with their terminal and SIGTSTP
// still suspends them. A closed stdout then fails the write instead of
// killing the process with SIGPIPE, so the command can end cleanly.
func CatchStop() *Catcher {
	ch := make(chan os.Signal, 2)
	var sigs []os.Signal
	for s, k := range table {
		if k == stop {
			sigs = append(sigs, s)
		}
	}
	signal.Notify(ch, sigs...)
	return &Catcher{C: ch, ch: ch, pipe: dropSIGPIPE()}
}

// IgnoreTTOU ignores SIGTTOU so a process in a background group may hand
// the terminal's foreground back (tcsetpgrp), which the kernel otherwise
// answers with SIGTTOU.
func IgnoreTTOU() { signal.Ignore(syscall.SIGTTOU) }

// Name is the signal's conventional name, such as SIGTERM, for logs.
func Name(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return sig.String()
}
