package keeper

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/internal/fence"
	"github.com/etcdlead/etcdlead/internal/logbuf"
	"github.com/etcdlead/etcdlead/signals"
	"github.com/etcdlead/etcdlead/supervisor/internal/proctree"
)

// Tick is the fence's tick where no boot-clock timer exists, and the
// interval of the SIGKILL sweeps until no descendant is left (the fence
// margin covers it).
const Tick = 25 * time.Millisecond

// Descriptors the supervisor hands the keeper, after stdin, stdout, stderr.
const (
	ctrlFD   = 3
	statusFD = 4
)

type keeperConfig struct {
	path       string
	argv       []string
	killSignal syscall.Signal
	fence      fence.Fence
	logLevel   string
	logJSON    bool
	cgroup     proctree.Cgroup // the child's cgroup; "": its process group alone
	env        []string        // from "start": added to the keeper's own environment for the child
}

// parseKeeperArgs takes every value from launch and has no defaults of its
// own: K and m are decided once, on the supervisor's side, and a keeper that
// made up its own would fence on different arithmetic than the term it
// serves.
func parseKeeperArgs(args []string) (keeperConfig, error) {
	var kc keeperConfig
	fs := flag.NewFlagSet("keeper", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	sig := fs.Int("signal", 0, "")
	fs.DurationVar(&kc.fence.KillTimeout, "kill-timeout", 0, "")
	fs.DurationVar(&kc.fence.Margin, "fence-margin", 0, "")
	fs.StringVar(&kc.path, "path", "", "")
	fs.StringVar(&kc.logLevel, "log-level", "", "")
	fs.BoolVar(&kc.logJSON, "log-json", false, "")
	cg := fs.String("cgroup", "", "")
	if err := fs.Parse(args); err != nil {
		return kc, err
	}
	kc.killSignal = syscall.Signal(*sig)
	kc.cgroup = proctree.Cgroup(*cg)
	kc.argv = fs.Args()
	switch {
	case kc.path == "" || len(kc.argv) == 0:
		return kc, errors.New("keeper: no command")
	case kc.killSignal <= 0:
		return kc, errors.New("keeper: no positive -signal")
	case kc.fence.KillTimeout <= 0:
		return kc, errors.New("keeper: no positive -kill-timeout")
	case kc.fence.Margin <= 0:
		return kc, errors.New("keeper: no positive -fence-margin")
	}
	return kc, nil
}

// keeperFlush bounds the keeper's wait for its last log lines at exit. Its
// report is sent by then; a stderr that does not drain only delays the end
// of a process nobody waits for.
const keeperFlush = time.Second

// Run is the keeper process: it starts the child, obeys the
// supervisor's pipe, enforces the fence, and returns once no process it
// started is left and their status was reported. Its return value is the
// keeper's exit code, which nobody relies on: the status travels over the
// pipe.
func Run(args []string) int {
	status := os.NewFile(statusFD, "status")
	defer status.Close()
	kc, ok := handshake(status, args)
	if !ok {
		return exitcode.Failure
	}
	// Caught rather than ignored, so the child starts with default
	// dispositions; the keeper obeys the pipe, not stray signals. Caught
	// before the first log line too: SIGPIPE from a closed stderr must not
	// kill the keeper. Not stopped: the keeper exits when this returns
	// (Catcher.Stop).
	absorbed := signals.Absorb()
	// Asynchronous, so that no signal of the fence waits on a stderr that
	// does not drain.
	log := logbuf.Logger(hclog.LoggerOptions{
		Name: "etcdlead.keeper", Level: hclog.LevelFromString(kc.logLevel), JSONFormat: kc.logJSON,
	})
	defer logbuf.Flush(keeperFlush)
	ctrl := ctrlPipe()
	becomeSubreaper(log)

	cmds := readCommands(ctrl)
	// What the start needs that no term decides is made while the keeper
	// waits: on the start, a standby keeper only checks the fence point and
	// forks.
	clock := newFenceClock(log)
	defer clock.close()
	begin := make(chan childStart, 1)
	started := make(chan startResult, 1)
	exited := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	go runChild(kc.cgroup, log, begin, started, exited, release)
	log.Trace("keeper ready")
	if !awaitStart(cmds, &kc) {
		close(begin)
		return 0 // the supervisor gave up this term: no child
	}
	log.Trace("start received")
	g := &groupState{fence: kc.fence, killSignal: kc.killSignal}
	// Armed before the child can start: a fence point that passes after the
	// check in runChild wakes the keeper at once.
	clock.arm(g.next())
	tty, ttyPgrp := foreground()
	begin <- childStart{kc, tty}
	res := <-started
	cg, ok := reportStart(status, log, kc.cgroup, res)
	if !ok {
		return 0
	}

	k := newKeeper(log, res.pid, g, clock, cg)
	defer k.close()
	k.loop(cmds, exited, absorbed.C)
	if tty {
		restoreForeground(res.pid, ttyPgrp)
	}
	reportExit(status, log, g, cg)
	return 0
}

// handshake says the keeper's protocol on the status pipe, then checks the
// supervisor's and parses the rest of args; false means the keeper must
// exit with exitcode.Failure. Said first, and checked before anything is parsed
// or read: a supervisor of another protocol must learn so even where this
// keeper would misread the rest, and no child may start under it.
func handshake(status io.Writer, args []string) (keeperConfig, bool) {
	fmt.Fprintln(status, Hello())
	if len(args) == 0 || args[0] != ProtocolArg() {
		if len(args) == 0 || !strings.HasPrefix(args[0], "-protocol=") {
			fmt.Fprintln(os.Stderr, "etcdlead keeper: only etcdlead starts a keeper")
		}
		// Else a supervisor of another protocol, which reads the line
		// above, starts another keeper and logs why.
		return keeperConfig{}, false
	}
	kc, err := parseKeeperArgs(args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdlead keeper:", err)
		return kc, false
	}
	return kc, true
}

// ctrlPipe is the supervisor's command pipe. The descriptors came without
// close-on-exec; the child must not hold them, or the supervisor could not
// see the keeper's death as EOF.
func ctrlPipe() *os.File {
	syscall.CloseOnExec(ctrlFD)
	syscall.CloseOnExec(statusFD)
	// Non-blocking, so that its reader parks on the runtime's poller
	// between commands rather than blocking a thread: a goroutine it wakes
	// (the start's) runs at once instead of waiting for the runtime to
	// notice the blocked thread. A pipe that refuses the mode is read
	// blocking.
	_ = syscall.SetNonblock(ctrlFD, true)
	return os.NewFile(ctrlFD, "ctrl")
}

// becomeSubreaper has orphans of the child's tree, in whatever group or
// session, re-parented here, so the keeper reaches them and knows when no
// descendant is left.
func becomeSubreaper(log hclog.Logger) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		log.Warn("cannot become child subreaper", "error", err)
	}
}

// reportStart tells the supervisor how the start went, and returns the
// cgroup the child runs in ("": its process group alone); false means no
// child runs.
func reportStart(status io.Writer, log hclog.Logger, want proctree.Cgroup, res startResult) (proctree.Cgroup, bool) {
	switch {
	case res.pastFence:
		fmt.Fprint(status, Report{Op: OpPastFence, Late: res.late})
		log.Warn("not starting the child: past its fence point", "late", res.late)
		return "", false
	case res.err != nil:
		fmt.Fprint(status, Report{Op: OpFailed, Code: res.code, Msg: res.err.Error()})
		return "", false
	}
	cg := want
	if res.cgroupErr != nil {
		cg = ""
		log.Warn("cannot start the child in its cgroup; containing it by its process group instead", "cgroup", string(want), "error", res.cgroupErr)
	}
	fmt.Fprint(status, Report{Op: OpStarted, Pid: res.pid, InCgroup: cg != ""})
	log.Debug("child started", "pid", res.pid, "cgroup", string(cg))
	return cg, true
}

// reportExit tells the supervisor how the child ended, once nothing of its
// tree is left.
func reportExit(status io.Writer, log hclog.Logger, g *groupState, cg proctree.Cgroup) {
	log.Trace("reporting exit")
	fmt.Fprint(status, Report{Op: OpExit, Code: g.exitCode(), Reason: g.reason, Signaled: g.signaled() && g.reason == ReasonExited})
	if g.reason == ReasonOrphaned && cg != "" {
		// Nobody else will: the supervisor is gone. Its own cgroup and
		// this keeper's are left to the next etcdlead's clean-up.
		_ = cg.Remove()
	}
}

// awaitStart holds the keeper, exec'd and initialised, until its term is
// won: for a standby keeper, starting the child then costs a pipe message
// instead of an exec of a keeper. A fresh keeper finds the message already
// waiting. The deadline comes only this way, so the fence point is checked
// against one value whichever way the keeper was started. False means the
// pipe closed first.
func awaitStart(cmds <-chan Command, kc *keeperConfig) bool {
	for c := range cmds {
		if c.Op == OpStart {
			kc.fence.Deadline = c.Deadline
			kc.env = c.Env
			return true
		}
	}
	return false
}

// childStart is what runChild needs once the term begins: the term's
// config, and whether the child takes the terminal.
type childStart struct {
	kc  keeperConfig
	tty bool
}

type startResult struct {
	pid       int
	code      int
	err       error
	cgroupErr error         // the child runs, but not in its cgroup
	pastFence bool          // refused: the fence point had passed
	late      time.Duration // by how much
}

// runChild starts the child once begin brings the term's config (a closed
// begin: no child), and tells of its exit, closing exited, without reaping
// it: the keeper reaps it (keeper.finish), so that its pid, which is its
// process group's id, cannot be reused while the keeper may still signal
// the group. It stays on one locked OS thread until release: Pdeathsig
// fires when the thread that forked the child exits, not the process. The
// thread and the cgroup's descriptor are readied before begin, off the
// start's path.
func runChild(cgroup proctree.Cgroup, log hclog.Logger, begin <-chan childStart, started chan<- startResult, exited, release chan struct{}) {
	runtime.LockOSThread()
	defer func() { <-release }()
	cgroupFD := -1
	var cgroupErr error
	if cgroup != "" {
		fd, err := unix.Open(string(cgroup), unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			cgroupErr = err
		} else {
			cgroupFD = fd
			defer unix.Close(fd)
		}
	}
	env := os.Environ()
	b, ok := <-begin
	if !ok {
		return
	}
	kc, tty := b.kc, b.tty
	// The last moment before the fork: a child started past its fence point
	// would run beside a successor that may already lead.
	if kc.fence.Deadline != 0 {
		if late := bootclock.Now() - kc.fence.SignalAt(); late >= 0 {
			started <- startResult{pastFence: true, late: late}
			return
		}
	}
	env = append(env, kc.env...)
	cmd := childCommand(kc, env, tty, cgroupFD)
	err := cmd.Start()
	if err != nil && cgroupFD >= 0 {
		// The kernel refused the cgroup (a limit reached since it was
		// made, say), not the command: start it without.
		cgroupErr = err
		cmd = childCommand(kc, env, tty, -1)
		err = cmd.Start()
	}
	if err != nil {
		started <- startResult{code: execFailureCode(err), err: err}
		return
	}
	pid := cmd.Process.Pid
	log.Trace("child forked")
	started <- startResult{pid: pid, cgroupErr: cgroupErr}
	// Waited for on a goroutine of its own: the one that wakes the keeper's
	// loop then ends, and the loop runs on its thread at once. This one,
	// locked, would park on release and pass the loop to another thread.
	go func() {
		defer close(exited)
		awaitExit(pid)
	}()
}

// childCommand is the child's command with environment env, started in
// the cgroup open at cgroupFD (-1: none).
func childCommand(kc keeperConfig, env []string, tty bool, cgroupFD int) *exec.Cmd {
	return &exec.Cmd{
		Path: kc.path, Args: kc.argv,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Env: env,
		SysProcAttr: &syscall.SysProcAttr{
			// A group of its own, and where no terminal is in the
			// way, a session too: the kernel's autogroup scheduling
			// then shares the CPU between sessions before processes,
			// so a child's tree that takes every CPU it can does not
			// starve the keeper and the supervisor, in the session
			// the child leaves, of the time to fence it.
			Setsid:      !tty,
			Setpgid:     tty,
			Pdeathsig:   syscall.SIGKILL,
			Foreground:  tty,
			Ctty:        0,
			UseCgroupFD: cgroupFD >= 0,
			CgroupFD:    cgroupFD,
		},
	}
}

// awaitExit returns once the child pid has exited, leaving it unreaped
// (WNOWAIT).
func awaitExit(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// execFailureCode follows the shells: exitcode.NotFound when the command does not
// exist, exitcode.CannotExec when it exists but cannot be executed.
func execFailureCode(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exitcode.NotFound
	}
	return exitcode.CannotExec
}

func readCommands(r io.ReadCloser) <-chan Command {
	out := make(chan Command)
	go func() {
		defer close(out)
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			c, err := parseCommand(sc.Text())
			if err != nil {
				continue
			}
			out <- c
		}
	}()
	return out
}

// foreground reports whether stdin is our controlling terminal, and which
// process group has it now, to hand it back when the child is done.
func foreground() (bool, int) {
	pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	if err != nil {
		return false, 0
	}
	return true, pgrp
}

// restoreForeground gives the terminal back if the child's group still has
// it. The keeper is in a background group here, so SIGTTOU must be ignored
// or the kernel would stop it instead.
func restoreForeground(childPgid, prev int) {
	if cur, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err != nil || cur != childPgid {
		return
	}
	signals.IgnoreTTOU()
	_ = unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, prev)
}
