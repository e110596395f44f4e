package main

import (
	"errors"
	"fmt"
)

// Exit codes, after timeout(1), env(1), flock(1) and tini. A child's own code
// (or 128+N for signal N) passes through unchanged.
const (
	exitOK          = 0
	exitNoLeader    = 3   // status: no leader
	exitConflict    = 75  // not leader when --wait ended (--conflict-exit-code)
	exitLostOnce    = 76  // --once: leadership lost while the command ran
	exitTimeout     = 124 // --timeout: the command ran too long
	exitFailure     = 125 // etcdlead failed: flags, configuration, etcd
	exitCannotExec  = 126 // COMMAND cannot be executed
	exitNotFound    = 127 // COMMAND not found
	exitSignalsBase = 128 // child ended by signal N: 128+N
)

// exitError carries an exit code; a nil err exits silently (the child's own
// status, for instance).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error { return &exitError{code: code, err: err} }

func failf(format string, args ...any) error {
	return withCode(exitFailure, fmt.Errorf(format, args...))
}

// exitCode is the one place that turns an outcome into a process exit code.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailure
}

// errorMessage is the one line printed for err, or "" for a silent exit.
func errorMessage(err error) string {
	if err == nil {
		return ""
	}
	var ee *exitError
	if errors.As(err, &ee) && ee.err == nil {
		return ""
	}
	return err.Error()
}
