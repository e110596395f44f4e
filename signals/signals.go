// Package signals decides which signals etcdlead catches and what each one
// means. It is the only caller of signal.Notify in etcdlead, so the list
// below is the whole truth about signal handling.
package signals

import (
	"golang.org/x/sys/unix"
	"os"
	"os/signal"
	"syscall"
)

// Action is what the supervisor does with a caught signal.
type Action int

const (
	// Stop: end the term; forward to the child if one runs, else exit.
	Stop Action = iota
	// Forward: pass to the child's group, if a child runs.
	Forward
	// Ignore: log and drop. A stopped supervisor would stop renewing its
	// lease while its child runs on; the fence would then kill the child.
	Ignore
)

var table = map[syscall.Signal]Action{
	syscall.SIGTERM:  Stop,
	syscall.SIGINT:   Stop,
	syscall.SIGHUP:   Forward,
	syscall.SIGUSR1:  Forward,
	syscall.SIGUSR2:  Forward,
	syscall.SIGQUIT:  Forward,
	syscall.SIGWINCH: Forward,
	syscall.SIGTSTP:  Ignore,
	syscall.SIGTTIN:  Ignore,
	syscall.SIGTTOU:  Ignore,
}

// Classify returns the action for sig; signals not in the table are not
// caught at all.
func Classify(sig os.Signal) Action {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return Ignore
	}
	a, ok := table[s]
	if !ok {
		return Ignore
	}
	return a
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

// Stop ends delivery and restores default handling.
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
