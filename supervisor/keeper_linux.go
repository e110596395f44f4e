package supervisor

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

	"github.com/etcdlead/etcdlead/internal/logbuf"
	"github.com/etcdlead/etcdlead/internal/trace"
	"github.com/etcdlead/etcdlead/signals"
)

// KeeperArg is argv[1] of the hidden keeper mode of the etcdlead binary: the
// keeper when no keeper binary (KeeperName) can be used.
const KeeperArg = "__etcdlead_keeper"

// keeperTick is the fence's tick where no boot-clock timer exists, and the
// interval of the SIGKILL sweeps until no descendant is left (the fence
// margin covers it).
const keeperTick = 25 * time.Millisecond

// Descriptors the supervisor hands the keeper, after stdin, stdout, stderr.
const (
	ctrlFD   = 3
	statusFD = 4
)

type keeperConfig struct {
	path       string
	argv       []string
	killSignal syscall.Signal
	fence      Fence
	logLevel   string
	logJSON    bool
	env        []string // from "start": added to the keeper's own environment for the child
}

// parseKeeperArgs takes every value from launch and has no defaults of its
// own: K and m are decided once, on the supervisor's side, and a keeper that
// made up its own would fence on different arithmetic than the term it
// serves.
func parseKeeperArgs(args []string) (keeperConfig, error) {
	var kc keeperConfig
	fs := flag.NewFlagSet(KeeperArg, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	sig := fs.Int("signal", 0, "")
	fs.DurationVar(&kc.fence.KillTimeout, "kill-timeout", 0, "")
	fs.DurationVar(&kc.fence.Margin, "fence-margin", 0, "")
	fs.StringVar(&kc.path, "path", "", "")
	fs.StringVar(&kc.logLevel, "log-level", "", "")
	fs.BoolVar(&kc.logJSON, "log-json", false, "")
	if err := fs.Parse(args); err != nil {
		return kc, err
	}
	kc.killSignal = syscall.Signal(*sig)
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

// RunKeeper is the keeper process: it starts the child, obeys the
// supervisor's pipe, enforces the fence, and returns once no process it
// started is left and their status was reported. Its return value is the
// keeper's exit code, which nobody relies on: the status travels over the
// pipe.
func RunKeeper(args []string) int {
	// Said first, and checked before anything is parsed or read: a
	// supervisor of another protocol must learn so even where this keeper
	// would misread the rest, and no child may start under it.
	status := os.NewFile(statusFD, "status")
	defer status.Close()
	fmt.Fprintln(status, hello())
	if len(args) == 0 || args[0] != protocolArg() {
		if len(args) == 0 || !strings.HasPrefix(args[0], "-protocol=") {
			fmt.Fprintln(os.Stderr, "etcdlead keeper: only etcdlead starts a keeper")
		}
		// Else a supervisor of another protocol, which reads the line
		// above, starts another keeper and logs why.
		return ExitFailure
	}
	kc, err := parseKeeperArgs(args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdlead keeper:", err)
		return ExitFailure
	}
	// The keeper's work is serial: a pipe message, a timer, a reap. With
	// one P the runtime has no idle processor to wake and spin for each of
	// them, which is most of what an idle keeper spends. Set here rather
	// than through GOMAXPROCS in the environment, which the child would
	// inherit.
	runtime.GOMAXPROCS(1)
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
	// The descriptors came without close-on-exec; the child must not hold
	// them, or the supervisor could not see the keeper's death as EOF.
	syscall.CloseOnExec(ctrlFD)
	syscall.CloseOnExec(statusFD)
	// Read through the runtime's poller: a read blocked in the kernel would
	// hold the keeper's one P after each message, and the loop the message
	// woke could not run until the runtime took the P back.
	_ = unix.SetNonblock(ctrlFD, true)
	ctrl := os.NewFile(ctrlFD, "ctrl")

	// Orphans of the child's tree, in whatever group or session, are
	// re-parented here, so the keeper reaches them and knows when no
	// descendant is left.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		log.Warn("cannot become child subreaper", "error", err)
	}

	cmds := readCommands(ctrl)
	go warmStart()
	trace.Mark("keeper.ready")
	if !awaitStart(cmds, &kc) {
		return 0 // the supervisor gave up this term: no child
	}
	g := &groupState{fence: kc.fence, killSignal: kc.killSignal}
	// Armed before the child can start: a fence point that passes after the
	// check in runChild wakes the keeper at once.
	clock := newFenceClock(log)
	defer clock.close()
	clock.arm(g.next())
	tty, ttyPgrp := foreground()
	started := make(chan startResult, 1)
	reaped := make(chan reapEvent, 16)
	go runChild(kc, tty, started, reaped)
	res := <-started
	switch {
	case res.pastFence:
		fmt.Fprintf(status, "%s %d\n", msgPastFence, int64(res.late))
		log.Warn("not starting the child: past its fence point", "late", res.late)
		return 0
	case res.err != nil:
		fmt.Fprintf(status, "%s %d %s\n", msgFailed, res.code, res.err)
		return 0
	}
	fmt.Fprintf(status, "%s %d\n", msgStarted, res.pid)
	log.Debug("child started", "pid", res.pid)

	k := &keeper{log: log, pgid: res.pid, pid: res.pid, g: g, clock: clock, sweeps: map[syscall.Signal]*sweep{}}
	k.loop(cmds, reaped, absorbed.C)
	k.closeSweeps()
	if tty {
		restoreForeground(res.pid, ttyPgrp)
	}
	trace.Mark("keeper.exit-report")
	if g.signaled() && g.reason == ReasonExited {
		fmt.Fprintf(status, "%s %d %s %s\n", msgExit, g.exitCode(), g.reason, exitSignaled)
	} else {
		fmt.Fprintf(status, "%s %d %s\n", msgExit, g.exitCode(), g.reason)
	}
	return 0
}

// awaitStart holds the keeper, exec'd and initialised, until its term is
// won: for a standby keeper, starting the child then costs a pipe message
// instead of an exec of a keeper. A fresh keeper finds the message already
// waiting. The deadline comes only this way, so the fence point is checked
// against one value whichever way the keeper was started. False means the
// pipe closed first.
func awaitStart(cmds <-chan command, kc *keeperConfig) bool {
	for c := range cmds {
		if c.op == msgStart {
			trace.Mark("keeper.start-msg")
			kc.fence.Deadline = c.deadline
			kc.env = c.env
			return true
		}
	}
	return false
}

// warmStart does, while the keeper waits for its term, what the first
// process start of a process otherwise does on the way to the child:
// package os checks once that the kernel's pidfds work, with a test clone
// of its own. A start that comes meanwhile waits for that one check, which
// ends before the child exists, and so before any reap (runChild).
func warmStart() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Release()
	}
}

type startResult struct {
	pid       int
	code      int
	err       error
	pastFence bool          // refused: the fence point had passed
	late      time.Duration // by how much
}

type reapEvent struct {
	pid    int
	status syscall.WaitStatus
}

// runChild starts the child and is the only waiter in the keeper. It stays
// on one locked OS thread for the child's whole life: Pdeathsig fires when
// the thread that forked the child exits, not the process.
func runChild(kc keeperConfig, tty bool, started chan<- startResult, reaped chan<- reapEvent) {
	runtime.LockOSThread()
	cmd := &exec.Cmd{
		Path: kc.path, Args: kc.argv,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Env: append(os.Environ(), kc.env...),
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:    true,
			Pdeathsig:  syscall.SIGKILL,
			Foreground: tty,
			Ctty:       0,
		},
	}
	// The last moment before the fork: a child started past its fence point
	// would run beside a successor that may already lead.
	if kc.fence.Deadline != 0 {
		if late := Now() - kc.fence.SignalAt(); late >= 0 {
			started <- startResult{pastFence: true, late: late}
			return
		}
	}
	if err := cmd.Start(); err != nil {
		started <- startResult{code: execFailureCode(err), err: err}
		return
	}
	trace.MarkInt("keeper.forked", "pid", int64(cmd.Process.Pid))
	started <- startResult{pid: cmd.Process.Pid}
	defer close(reaped)
	// Wait4 blocks in the kernel and holds the keeper's one P until the
	// runtime takes it back; each yield below lets the loop just woken
	// (started, reaped) run first.
	runtime.Gosched()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, unix.WALL, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return // ECHILD: nothing left to reap
		}
		trace.MarkInt("keeper.reaped", "pid", int64(pid))
		reaped <- reapEvent{pid: pid, status: ws}
		runtime.Gosched()
	}
}

// execFailureCode follows the shells: ExitNotFound when the command does not
// exist, ExitCannotExec when it exists but cannot be executed.
func execFailureCode(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return ExitNotFound
	}
	return ExitCannotExec
}

func readCommands(r io.ReadCloser) <-chan command {
	out := make(chan command)
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
