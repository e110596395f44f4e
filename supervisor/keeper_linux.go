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
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/internal/logbuf"
	"github.com/etcdlead/etcdlead/signals"
)

// KeeperArg is argv[1] of the hidden keeper mode of the etcdlead binary.
const KeeperArg = "__etcdlead_keeper"

// keeperTick is the poll interval for the end of the child's group after the
// child exited, and the fence's tick where no boot-clock timer exists
// (DESIGN.md asks for at most 50 ms; the fence margin covers it).
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
	standby    bool     // wait for "start" before starting the child
	env        []string // added to the keeper's own environment for the child
}

func parseKeeperArgs(args []string) (keeperConfig, error) {
	var kc keeperConfig
	fs := flag.NewFlagSet(KeeperArg, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	sig := fs.Int("signal", int(syscall.SIGTERM), "")
	deadline := fs.Int64("deadline", 0, "")
	fs.DurationVar(&kc.fence.KillTimeout, "kill-timeout", 5*time.Second, "")
	fs.DurationVar(&kc.fence.Margin, "fence-margin", 250*time.Millisecond, "")
	fs.StringVar(&kc.path, "path", "", "")
	fs.StringVar(&kc.logLevel, "log-level", "info", "")
	fs.BoolVar(&kc.logJSON, "log-json", false, "")
	fs.BoolVar(&kc.standby, "standby", false, "")
	if err := fs.Parse(args); err != nil {
		return kc, err
	}
	kc.killSignal = syscall.Signal(*sig)
	kc.fence.Deadline = time.Duration(*deadline)
	kc.argv = fs.Args()
	if kc.path == "" || len(kc.argv) == 0 {
		return kc, errors.New("keeper: no command")
	}
	return kc, nil
}

// keeperFlush bounds the keeper's wait for its last log lines at exit. Its
// report is sent by then; a stderr that does not drain only delays the end
// of a process nobody waits for.
const keeperFlush = time.Second

// RunKeeper is the keeper process: it starts the child, obeys the
// supervisor's pipe, enforces the fence, and returns once the child's group
// is gone and its status was reported. Its return value is the keeper's exit
// code, which nobody relies on: the status travels over the pipe.
func RunKeeper(args []string) int {
	kc, err := parseKeeperArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdlead keeper:", err)
		return 125
	}
	// Caught rather than ignored, so the child starts with default
	// dispositions; the keeper obeys the pipe, not stray signals. Caught
	// before the first log line too: SIGPIPE from a closed stderr must not
	// kill the keeper.
	absorbed := signals.Absorb()
	defer absorbed.Stop()
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
	ctrl := os.NewFile(ctrlFD, "ctrl")
	status := os.NewFile(statusFD, "status")
	defer status.Close()

	// Orphans of the child's group are re-parented here, so the keeper can
	// reap them and know when the group is really gone.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		log.Warn("cannot become child subreaper", "error", err)
	}

	cmds := readCommands(ctrl)
	if kc.standby && !awaitStart(cmds, &kc) {
		return 0 // the supervisor gave up this term: no child
	}
	tty, ttyPgrp := foreground()
	started := make(chan startResult, 1)
	reaped := make(chan reapEvent, 16)
	go runChild(kc, tty, started, reaped)
	res := <-started
	if res.err != nil {
		fmt.Fprintf(status, "%s %d %s\n", msgFailed, res.code, res.err)
		return 0
	}
	fmt.Fprintf(status, "%s %d\n", msgStarted, res.pid)
	log.Debug("child started", "pid", res.pid)

	g := &groupState{fence: kc.fence, killSignal: kc.killSignal}
	k := &keeper{log: log, pgid: res.pid, pid: res.pid, g: g}
	k.loop(cmds, reaped, absorbed.C)
	if tty {
		restoreForeground(res.pid, ttyPgrp)
	}
	fmt.Fprintf(status, "%s %d %s\n", msgExit, g.exitCode(), g.reason)
	return 0
}

// awaitStart holds a standby keeper, already exec'd and initialised, until
// its term is won: starting the child then costs a pipe message instead of
// an exec of etcdlead. False means the pipe closed first.
func awaitStart(cmds <-chan command, kc *keeperConfig) bool {
	for c := range cmds {
		if c.op == msgStart {
			kc.fence.Deadline = c.deadline
			kc.env = c.env
			return true
		}
	}
	return false
}

type keeper struct {
	log  hclog.Logger
	pgid int
	pid  int
	g    *groupState
}

func (k *keeper) loop(cmds <-chan command, reaped <-chan reapEvent, sigs <-chan os.Signal) {
	timer, err := newBootTimer()
	var tick *time.Ticker
	if err != nil {
		k.log.Error("no boot-clock timer; checking the fence on a tick", "error", err)
		tick = time.NewTicker(keeperTick)
		defer tick.Stop()
	} else {
		defer timer.close()
	}
	for {
		var wake <-chan struct{}
		var ticks <-chan time.Time
		if timer != nil {
			timer.at(k.g.next())
			wake = timer.C
		} else {
			ticks = tick.C
		}
		// While the child is gone but not yet its whole group, look for the
		// group's end on a short poll too: a member reaped by another
		// member sends the keeper no event.
		var poll <-chan time.Time
		if k.g.childExit != nil {
			poll = time.After(keeperTick)
		}
		select {
		case c, ok := <-cmds:
			k.command(c, ok, &cmds)
		case ev, ok := <-reaped:
			k.reaped(ev, ok, &reaped)
		case s := <-sigs:
			k.log.Debug("keeper ignores signal", "signal", s)
		case <-wake:
			k.fenceCheck()
		case <-ticks:
			k.fenceCheck()
		case <-poll:
		}
		if k.g.childExit != nil && k.groupGone() {
			return
		}
	}
}

func (k *keeper) command(c command, ok bool, cmds *<-chan command) {
	if !ok {
		*cmds = nil
		k.send(k.g.orphaned(Now()))
		k.log.Warn("supervisor gone; stopping the child", "pgid", k.pgid)
		return
	}
	k.apply(c)
}

func (k *keeper) reaped(ev reapEvent, ok bool, reaped *<-chan reapEvent) {
	if !ok {
		*reaped = nil
	} else if ev.pid == k.pid {
		k.send(k.g.exited(Now(), ev.status))
	}
}

func (k *keeper) apply(c command) {
	now := Now()
	switch c.op {
	case msgDeadline:
		k.g.setDeadline(c.deadline)
	case msgStop:
		k.send(k.g.stop(now, c.sig, ReasonStopped))
	case msgKill:
		k.send(k.g.kill(ReasonStopped))
	case msgSignal:
		k.send([]syscall.Signal{c.sig})
	}
}

func (k *keeper) fenceCheck() {
	before := k.g.stopping
	k.send(k.g.tick(Now()))
	if !before && k.g.stopping && k.g.reason == ReasonFenced {
		k.log.Warn("fence: lease deadline near, stopping the child", "signal", signals.Name(k.g.killSignal))
	}
}

// send signals the group; the log lines come after every signal went out.
func (k *keeper) send(sigs []syscall.Signal) {
	var failed []error
	for _, s := range sigs {
		if err := syscall.Kill(-k.pgid, s); err != nil && err != syscall.ESRCH {
			failed = append(failed, fmt.Errorf("%s: %w", signals.Name(s), err))
		}
	}
	for _, err := range failed {
		k.log.Warn("cannot signal the child's group", "error", err)
	}
}

// groupGone is true once no process is left in the child's group. Zombies
// count as present until reaped, so "gone" means reaped.
func (k *keeper) groupGone() bool {
	return syscall.Kill(-k.pgid, 0) == syscall.ESRCH
}

type startResult struct {
	pid  int
	code int
	err  error
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
	if err := cmd.Start(); err != nil {
		started <- startResult{code: execFailureCode(err), err: err}
		return
	}
	started <- startResult{pid: cmd.Process.Pid}
	defer close(reaped)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return // ECHILD: nothing left to reap
		}
		reaped <- reapEvent{pid: pid, status: ws}
	}
}

// execFailureCode follows the shells: 127 when the command does not exist,
// 126 when it exists but cannot be executed.
func execFailureCode(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return 127
	}
	return 126
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
