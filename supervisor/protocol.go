package supervisor

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The supervisor and the keeper talk in short text lines over two pipes: a
// human can read them in strace, and a half-written line can only come from
// a dead peer, which each side treats as such.
//
//	supervisor -> keeper: "deadline NS" | "stop SIGNUM" | "kill" | "signal SIGNUM"
//	keeper -> supervisor: "started PID" | "failed CODE MESSAGE" | "exit CODE REASON"
const (
	msgDeadline = "deadline"
	msgStop     = "stop"
	msgKill     = "kill"
	msgSignal   = "signal"
	msgStarted  = "started"
	msgFailed   = "failed"
	msgExit     = "exit"
)

// Reason says why the child's group ended.
type Reason string

const (
	ReasonExited     Reason = "exited"      // the child ended by itself
	ReasonStopped    Reason = "stopped"     // the supervisor asked
	ReasonFenced     Reason = "fenced"      // the lease deadline came close
	ReasonOrphaned   Reason = "orphaned"    // the supervisor's pipe closed
	ReasonKeeperLost Reason = "keeper-lost" // the keeper died without a report
)

type command struct {
	op       string
	deadline time.Duration
	sig      syscall.Signal
}

func (c command) String() string {
	switch c.op {
	case msgDeadline:
		return fmt.Sprintf("%s %d\n", c.op, int64(c.deadline))
	case msgStop, msgSignal:
		return fmt.Sprintf("%s %d\n", c.op, int(c.sig))
	default:
		return c.op + "\n"
	}
}

func parseCommand(line string) (command, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return command{}, fmt.Errorf("empty command")
	}
	c := command{op: f[0]}
	switch c.op {
	case msgKill:
		return c, nil
	case msgDeadline, msgStop, msgSignal:
		if len(f) != 2 {
			return c, fmt.Errorf("malformed command %q", line)
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return c, fmt.Errorf("malformed command %q", line)
		}
		if c.op == msgDeadline {
			c.deadline = time.Duration(n)
		} else {
			c.sig = syscall.Signal(n)
		}
		return c, nil
	}
	return c, fmt.Errorf("unknown command %q", line)
}
