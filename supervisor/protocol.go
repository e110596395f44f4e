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
//	supervisor -> keeper: "start NS [QUOTED-ENV...]" (first, once)
//	                      | "deadline NS" | "stop SIGNUM" | "kill" | "signal SIGNUM"
//	keeper -> supervisor: "keeper PROTOCOL" (first, once)
//	                      then "started PID [cgroup]" | "failed CODE MESSAGE" | "past-fence LATE_NS"
//	                      then "exit CODE REASON [signaled]"
//
// The keeper may be a binary of its own (cmd/etcdlead-keeper) from another
// release than the etcdlead that starts it: a package upgrade replaces both
// files while etcdlead runs. So one exchange never changes shape, whatever
// else does: the keeper's first argument is "-protocol=P", the supervisor's
// protocol, and the keeper's first act is to write "keeper P'" with its own.
// A keeper whose P' is not P exits at once, before it reads its pipe, so it
// never starts a child; the supervisor, reading that line before the
// keeper's report, takes the mismatch as a refusal. The supervisor writes
// "start" without waiting for the line: the check adds no round trip.
const (
	msgKeeper   = "keeper"
	msgStart    = "start"
	msgDeadline = "deadline"
	msgStop     = "stop"
	msgKill     = "kill"
	msgSignal   = "signal"
	msgStarted  = "started"
	// Follows a start's pid when the child runs in the cgroup it was given.
	startedInCgroup = "cgroup"
	msgFailed       = "failed"
	// The keeper refused to start the child: the fence point had passed.
	msgPastFence = "past-fence"
	msgExit      = "exit"
	// Follows an exit report when a signal ended a child that the keeper
	// did not stop (reason exited).
	exitSignaled = "signaled"
)

// keeperProtocol names the language of the lines above and of the keeper's
// arguments: change it with any change to their shape or meaning. A
// variable, so that a test can build a keeper that speaks another one
// (-ldflags -X).
var keeperProtocol = "3"

// protocolArg is the keeper's first argument.
func protocolArg() string { return "-protocol=" + keeperProtocol }

// hello is the keeper's first line.
func hello() string { return msgKeeper + " " + keeperProtocol }

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
	env      []string // start: variables added to the child's environment
}

func (c command) String() string {
	switch c.op {
	case msgStart:
		var b strings.Builder
		fmt.Fprintf(&b, "%s %d", c.op, int64(c.deadline))
		for _, kv := range c.env {
			b.WriteString(" " + strconv.Quote(kv))
		}
		return b.String() + "\n"
	case msgDeadline:
		return fmt.Sprintf("%s %d\n", c.op, int64(c.deadline))
	case msgStop, msgSignal:
		return fmt.Sprintf("%s %d\n", c.op, int(c.sig))
	default:
		return c.op + "\n"
	}
}

func parseCommand(line string) (command, error) {
	line = strings.TrimSuffix(line, "\n")
	if rest, ok := strings.CutPrefix(line, msgStart+" "); ok {
		return parseStart(rest)
	}
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

func parseStart(rest string) (command, error) {
	c := command{op: msgStart}
	num, rest, _ := strings.Cut(rest, " ")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return c, fmt.Errorf("malformed start %q", rest)
	}
	c.deadline = time.Duration(n)
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return c, fmt.Errorf("malformed start environment %q", rest)
		}
		kv, _ := strconv.Unquote(q)
		c.env = append(c.env, kv)
		rest = rest[len(q):]
	}
	return c, nil
}
