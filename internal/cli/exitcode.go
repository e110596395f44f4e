package cli

import (
	"errors"
	"fmt"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/internal/runner"
)

// The numbers live in internal/exitcode; exitCode below decides which
// outcome gets which.

// exitError is an end of the CLI's own, outside a run: bad input, a command
// that cannot run, status without a leader. A nil err exits silently.
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
	return withCode(exitcode.Failure, fmt.Errorf(format, args...))
}

// runEnd is how a run ended, with the code the user chose for losing.
type runEnd struct {
	*runner.Outcome
	conflictCode int
}

func (e *runEnd) Unwrap() error { return e.Outcome }

// exitCode is the one place that turns an outcome into a process exit
// code. Its cases are README.md's "Exit codes" table, row for row
// (exitcode_test.go holds them to it).
func exitCode(err error) int {
	var end *runEnd
	var ee *exitError
	switch {
	case err == nil:
		return exitcode.OK
	case errors.As(err, &end):
		switch end.Kind {
		case runner.ChildExited, runner.Stopped:
			return end.Code // the child's code, or 128+N; 0 without a child
		case runner.NotLeader:
			return end.conflictCode
		case runner.LostOnce:
			return exitcode.LostOnce
		case runner.TimedOut:
			return exitcode.Timeout
		case runner.ExecFailed:
			return end.Code // 126 or 127
		}
		return exitcode.Failure // Refused, Unreachable, KeeperLost, Failed
	case errors.As(err, &ee):
		return ee.code
	}
	return exitcode.Failure
}

// errorMessage is the one line printed for err, or "" for a silent exit.
func errorMessage(err error) string {
	var end *runEnd
	var ee *exitError
	var he *campaign.HoldersError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &he):
		return he.Format("--" + flagHolders)
	case errors.As(err, &end):
		if end.Err == nil || silentLoss(end.Outcome, end.conflictCode) {
			return ""
		}
	case errors.As(err, &ee):
		if ee.err == nil {
			return ""
		}
	}
	return err.Error()
}
