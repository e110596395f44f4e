package keeper

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
	msgKeeper = "keeper"
	// Follows a start's pid when the child runs in the cgroup it was given.
	startedInCgroup = "cgroup"
	// Follows an exit report when a signal ended a child that the keeper
	// did not stop (reason exited).
	exitSignaled = "signaled"
)

// The supervisor's commands.
const (
	OpStart    = "start"
	OpDeadline = "deadline"
	OpStop     = "stop"
	OpKill     = "kill"
	OpSignal   = "signal"
)

// The keeper's reports.
const (
	OpStarted = "started"
	OpFailed  = "failed"
	// The keeper refused to start the child: the fence point had passed.
	OpPastFence = "past-fence"
	OpExit      = "exit"
)

// keeperProtocol names the language of the lines above and of the keeper's
// arguments: change it with any change to their shape or meaning. A
// variable, so that a test can build a keeper that speaks another one
// (-ldflags -X).
var keeperProtocol = "3"

// ProtocolArg is the keeper's first argument.
func ProtocolArg() string { return "-protocol=" + keeperProtocol }

// Hello is the keeper's first line.
func Hello() string { return msgKeeper + " " + keeperProtocol }

// Reason says why the child's group ended.
type Reason string

const (
	ReasonExited     Reason = "exited"      // the child ended by itself
	ReasonStopped    Reason = "stopped"     // the supervisor asked
	ReasonFenced     Reason = "fenced"      // the lease deadline came close
	ReasonOrphaned   Reason = "orphaned"    // the supervisor's pipe closed
	ReasonKeeperLost Reason = "keeper-lost" // the keeper died without a report
)

// Command is one line from the supervisor.
type Command struct {
	Op       string
	Deadline time.Duration  // start, deadline
	Sig      syscall.Signal // stop, signal
	Env      []string       // start: variables added to the child's environment
}

func (c Command) String() string {
	switch c.Op {
	case OpStart:
		var b strings.Builder
		fmt.Fprintf(&b, "%s %d", c.Op, int64(c.Deadline))
		for _, kv := range c.Env {
			b.WriteString(" " + strconv.Quote(kv))
		}
		return b.String() + "\n"
	case OpDeadline:
		return fmt.Sprintf("%s %d\n", c.Op, int64(c.Deadline))
	case OpStop, OpSignal:
		return fmt.Sprintf("%s %d\n", c.Op, int(c.Sig))
	default:
		return c.Op + "\n"
	}
}

func parseCommand(line string) (Command, error) {
	line = strings.TrimSuffix(line, "\n")
	if rest, ok := strings.CutPrefix(line, OpStart+" "); ok {
		return parseStart(rest)
	}
	f := strings.Fields(line)
	if len(f) == 0 {
		return Command{}, fmt.Errorf("empty command")
	}
	c := Command{Op: f[0]}
	switch c.Op {
	case OpKill:
		return c, nil
	case OpDeadline, OpStop, OpSignal:
		if len(f) != 2 {
			return c, fmt.Errorf("malformed command %q", line)
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return c, fmt.Errorf("malformed command %q", line)
		}
		if c.Op == OpDeadline {
			c.Deadline = time.Duration(n)
		} else {
			c.Sig = syscall.Signal(n)
		}
		return c, nil
	}
	return c, fmt.Errorf("unknown command %q", line)
}

func parseStart(rest string) (Command, error) {
	c := Command{Op: OpStart}
	num, rest, _ := strings.Cut(rest, " ")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return c, fmt.Errorf("malformed start %q", rest)
	}
	c.Deadline = time.Duration(n)
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return c, fmt.Errorf("malformed start environment %q", rest)
		}
		kv, _ := strconv.Unquote(q)
		c.Env = append(c.Env, kv)
		rest = rest[len(q):]
	}
	return c, nil
}

// Report is one line from the keeper after its hello.
type Report struct {
	Op       string
	Pid      int           // started
	InCgroup bool          // started: in the cgroup it was given
	Late     time.Duration // past-fence: by how much
	Code     int           // failed, exit
	Msg      string        // failed
	Reason   Reason        // exit
	Signaled bool          // exit: a signal the keeper did not send ended the child
}

func (r Report) String() string {
	switch r.Op {
	case OpStarted:
		if r.InCgroup {
			return fmt.Sprintf("%s %d %s\n", r.Op, r.Pid, startedInCgroup)
		}
		return fmt.Sprintf("%s %d\n", r.Op, r.Pid)
	case OpPastFence:
		return fmt.Sprintf("%s %d\n", r.Op, int64(r.Late))
	case OpFailed:
		return fmt.Sprintf("%s %d %s\n", r.Op, r.Code, oneLine(r.Msg))
	case OpExit:
		if r.Signaled {
			return fmt.Sprintf("%s %d %s %s\n", r.Op, r.Code, r.Reason, exitSignaled)
		}
		return fmt.Sprintf("%s %d %s\n", r.Op, r.Code, r.Reason)
	}
	return r.Op + "\n"
}

// ParseReport reads one of the keeper's reports.
func ParseReport(line string) (Report, error) {
	line = strings.TrimSuffix(line, "\n")
	f := strings.SplitN(line, " ", 3)
	r := Report{Op: f[0]}
	var err error
	switch {
	case r.Op == OpStarted && (len(f) == 2 || len(f) == 3 && f[2] == startedInCgroup):
		r.Pid, err = strconv.Atoi(f[1])
		r.InCgroup = len(f) == 3
	case r.Op == OpPastFence && len(f) == 2:
		var late int64
		late, err = strconv.ParseInt(f[1], 10, 64)
		r.Late = time.Duration(late)
	case r.Op == OpFailed && len(f) == 3:
		r.Code, err = strconv.Atoi(f[1])
		r.Msg = f[2]
	case r.Op == OpExit && len(f) == 3:
		r.Code, err = strconv.Atoi(f[1])
		reason, flag, _ := strings.Cut(f[2], " ")
		r.Reason, r.Signaled = Reason(reason), flag == exitSignaled
		if flag != "" && flag != exitSignaled || strings.Contains(reason, " ") {
			err = fmt.Errorf("malformed")
		}
	default:
		err = fmt.Errorf("unknown")
	}
	if err != nil {
		return r, fmt.Errorf("keeper said %q", line)
	}
	return r, nil
}

// oneLine keeps a message on its line: a newline would end the report.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
