package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/supervisor/internal/keeper"
	"github.com/etcdlead/etcdlead/supervisor/internal/proctree"
)

// Spec describes one child: what to run and how the keeper must stop it.
type Spec struct {
	Path        string   // resolved executable
	Argv        []string // argv[0] as the user gave it, then the arguments
	Env         []string // the child's whole environment
	KillSignal  syscall.Signal
	KillTimeout time.Duration
	FenceMargin time.Duration
	Deadline    time.Duration // boot-clock fence deadline at start; 0 for none
	LogLevel    string
	LogJSON     bool
	// Stdin, Stdout, Stderr default to the supervisor's own.
	Stdin, Stdout, Stderr *os.File
}

func orStd(f, std *os.File) *os.File {
	if f != nil {
		return f
	}
	return std
}

// ExecError is a child that could not be started: Code is exitcode.CannotExec or
// exitcode.NotFound.
type ExecError struct {
	Code int
	Msg  string
}

func (e *ExecError) Error() string { return e.Msg }

// ErrPastFence is a child the keeper refused to start because the fence
// point (deadline-K-m on the boot clock) had passed: it could not be stopped
// in order before the lease may end. No child was started and the keeper is
// gone; the term is lost.
var ErrPastFence = errors.New("child not started: past its fence point")

// errKeeperEnded is a keeper that died before it reported the child's start.
var errKeeperEnded = errors.New("keeper ended before starting the child")

// errStandbyLost is a standby keeper found dead when its term came.
var errStandbyLost = errors.New("standby keeper died")

// errKeeperProtocol is a keeper binary that speaks another protocol than
// this process: it refused the term and started nothing.
var errKeeperProtocol = errors.New("keeper speaks another protocol")

// Result is how a child's group ended.
type Result struct {
	Code   int    // the child's exit code, or exitcode.Signal(N) for signal N
	Reason Reason // who ended it
	// Signaled: the child ended by itself (ReasonExited) through signal
	// Code-exitcode.SignalBase, which no supervisor sent (a Ctrl-C, a kill by
	// hand); it did not merely exit with that code.
	Signaled bool
}

// Child is the supervisor's handle on a keeper and, through it, the child.
// Its methods are safe for concurrent use. A stop or a signal sent after the
// group ended is a no-op.
type Child struct {
	log    hclog.Logger
	pid    int // the direct child, also its group id
	keeper *keeperProc
	cg     proctree.Cgroup // the child's cgroup, where the keeper started it there
	mu     sync.Mutex
	ctrl   *os.File
	done   chan struct{}
	res    Result
	// The supervisor's own fence (supfence_linux.go): the deadline the
	// keeper was given last, and whether this process fenced the term.
	fence  Fence
	moved  chan struct{}
	fenced bool
	gone   chan struct{} // see Gone
}

// Start launches the keeper, which starts the child. It returns once the child
// runs, with an *ExecError when it could not be executed, or with an error
// that is ErrPastFence.
func Start(spec Spec, log hclog.Logger) (*Child, error) {
	k, err := launch(spec, log)
	if err != nil {
		return nil, err
	}
	return beginTerm(k, spec, spec.Deadline, nil, log)
}

// Pending is a keeper started ahead of its term, exec'd and initialised,
// waiting for Start. Exactly one of Start or Cancel must be called.
type Pending struct {
	k    *keeperProc
	spec Spec // for a fresh keeper if this one dies before its term
}

// Prepare starts a standby keeper for spec; spec.Deadline is ignored (the
// deadline comes with Start).
func Prepare(spec Spec, log hclog.Logger) (*Pending, error) {
	k, err := launch(spec, log)
	if err != nil {
		return nil, err
	}
	return &Pending{k: k, spec: spec}, nil
}

// Start starts the child with the term's fence deadline and the term's
// variables added to its environment. A standby keeper that died meanwhile
// is replaced by a fresh one (one log line): its term goes on. Errors are
// those of the package's Start.
func (p *Pending) Start(deadline time.Duration, env []string, log hclog.Logger) (*Child, error) {
	c, err := beginTerm(p.k, p.spec, deadline, env, log)
	if !errors.Is(err, errKeeperEnded) {
		return c, err
	}
	log.Warn("starting the child under a fresh keeper", "error", fmt.Errorf("%w: %v", errStandbyLost, err))
	k, err := launch(p.spec, log)
	if err != nil {
		return nil, err
	}
	return beginTerm(k, p.spec, deadline, env, log)
}

// beginTerm begins the term on k. A keeper binary of another protocol
// refused it, and the fallback is this process's keeper by now: the term
// begins on that instead.
func beginTerm(k *keeperProc, spec Spec, deadline time.Duration, env []string, log hclog.Logger) (*Child, error) {
	c, err := k.begin(deadline, env, log)
	if !errors.Is(err, errKeeperProtocol) || k.path == "" {
		return c, err
	}
	if k, err = launch(spec, log); err != nil {
		return nil, err
	}
	return k.begin(deadline, env, log)
}

// Cancel ends a standby keeper that will not be needed, and waits for it.
func (p *Pending) Cancel() { p.k.cancel() }

// keeperProc is a keeper process and the supervisor's ends of its pipes.
type keeperProc struct {
	cmd  *exec.Cmd
	path string   // the keeper binary, or "" for the fallback (selfExe)
	ctrl *os.File // supervisor -> keeper
	stat *os.File // keeper -> supervisor
	cg   termCgroups
	log  hclog.Logger
	// fence holds K and m; the deadline comes with the term.
	fence Fence
}

// launch starts a keeper that waits for its start message: a fresh keeper and
// a standby one take the term's deadline by the same route, so the fence
// point is checked the same way on both. A keeper binary that cannot be
// started gives way to the fallback for good (keeperExe).
func launch(spec Spec, log hclog.Logger) (*keeperProc, error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	ctrlR, ctrlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		ctrlR.Close()
		ctrlW.Close()
		return nil, err
	}
	becomeSubreaper()
	path := keeperPath(log)
	tc := newTermCgroups(log)
	k := &keeperProc{path: path, ctrl: ctrlW, stat: statR, cg: tc, log: log,
		fence: Fence{KillTimeout: spec.KillTimeout, Margin: spec.FenceMargin}}
	err = k.start(spec, ctrlR, statW)
	if err != nil && path != "" {
		notKeeper(path, fmt.Sprintf("cannot start it: %v", err), log)
		k.path = ""
		err = k.start(spec, ctrlR, statW)
	}
	ctrlR.Close()
	statW.Close()
	if err != nil {
		ctrlW.Close()
		statR.Close()
		tc.remove(log)
		return nil, fmt.Errorf("start keeper: %w", err)
	}
	return k, nil
}

// keeperCmd is the keeper binary at path, or the fallback when path is "".
// Both take the same arguments, the protocol first.
func keeperCmd(path string, spec Spec, ctrlR, statW *os.File, tc termCgroups, cgroupFD int) *exec.Cmd {
	args := append([]string{keeper.ProtocolArg(),
		"-cgroup", string(tc.child),
		"-path", spec.Path,
		"-signal", strconv.Itoa(int(spec.KillSignal)),
		"-kill-timeout", spec.KillTimeout.String(),
		"-fence-margin", spec.FenceMargin.String(),
		"-log-level", spec.LogLevel,
		"-log-json=" + strconv.FormatBool(spec.LogJSON),
		"--"}, spec.Argv...)
	cmd := &exec.Cmd{
		Path: path, Args: append([]string{path}, args...),
		Env:        spec.Env,
		Stdin:      orStd(spec.Stdin, os.Stdin),
		Stdout:     orStd(spec.Stdout, os.Stdout),
		Stderr:     orStd(spec.Stderr, os.Stderr),
		ExtraFiles: []*os.File{ctrlR, statW},
		// A group of its own: a kill of the supervisor's group, even with
		// SIGKILL, must leave the keeper alive to stop the child in order.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	intoCgroup(cmd.SysProcAttr, cgroupFD)
	if path == "" {
		cmd.Path, cmd.Args = selfExe, append([]string{os.Args[0], KeeperArg}, args...)
	}
	return cmd
}

// begin sends the term's start to a keeper that waits for it, and reads
// the keeper's report. A keeper that reads its pipe only after its own
// start-up finds the message waiting: the write adds no round trip, and nor
// does the protocol check, a line that the keeper wrote by then. A write
// fails only when the keeper is gone; what it said before it went tells a
// refusal from a death.
func (k *keeperProc) begin(deadline time.Duration, env []string, log hclog.Logger) (*Child, error) {
	log.Trace("sending start to keeper")
	_, _ = k.ctrl.WriteString(keeper.Command{Op: keeper.OpStart, Deadline: deadline, Env: env}.String())
	return k.started(deadline, log)
}

// cancel closes the keeper's pipe, which ends a keeper waiting for its
// start, and waits for it.
func (k *keeperProc) cancel() {
	k.ctrl.Close()
	_ = k.wait()
	k.stat.Close()
	k.cg.remove(k.log)
}

// started reads the keeper's first report and hands the keeper to a Child.
func (k *keeperProc) started(deadline time.Duration, log hclog.Logger) (*Child, error) {
	status := bufio.NewScanner(k.stat)
	err := readHello(status)
	var pid int
	var inCgroup bool
	if err == nil {
		pid, inCgroup, err = readStarted(status)
	}
	if err != nil {
		k.cancel()
		if errors.Is(err, errKeeperProtocol) {
			notKeeper(k.path, err.Error(), log)
		}
		// A keeper of another protocol refuses before it reads its pipe,
		// so it leaves nothing; a foreign one that did not is dealt with
		// like a dead one.
		if errors.Is(err, errKeeperEnded) || errors.Is(err, errKeeperProtocol) {
			// It may have forked the child before it died: whatever it
			// started is this process's orphan now, and goes first.
			if left := killOrphans(0).wait(orphanWait); left > 0 {
				log.Error("processes left by a dead keeper still run", "count", left)
			}
		}
		return nil, err
	}
	c := &Child{log: log, ctrl: k.ctrl, done: make(chan struct{}), pid: pid, keeper: k,
		fence: k.fence, moved: make(chan struct{}, 1), gone: make(chan struct{})}
	c.fence.Deadline = deadline
	if inCgroup {
		c.cg = k.cg.child
	}
	go c.wait(k, status)
	go c.superviseFence()
	return c, nil
}

// readHello reads the keeper's first line, its protocol.
func readHello(status *bufio.Scanner) error {
	if !status.Scan() {
		return errKeeperEnded
	}
	if got := status.Text(); got != keeper.Hello() {
		return fmt.Errorf("%w: it said %q, this binary speaks %q", errKeeperProtocol, got, keeper.Hello())
	}
	return nil
}

// readStarted reads the keeper's report of the start: the child's pid, and
// whether it runs in the cgroup it was given.
func readStarted(status *bufio.Scanner) (int, bool, error) {
	if !status.Scan() {
		return 0, false, errKeeperEnded
	}
	r, err := keeper.ParseReport(status.Text())
	switch {
	case err != nil:
		return 0, false, err
	case r.Op == keeper.OpStarted:
		return r.Pid, r.InCgroup, nil
	case r.Op == keeper.OpPastFence:
		return 0, false, fmt.Errorf("%w (%s late)", ErrPastFence, r.Late)
	case r.Op == keeper.OpFailed:
		return 0, false, &ExecError{Code: r.Code, Msg: r.Msg}
	}
	return 0, false, fmt.Errorf("keeper said %q", status.Text())
}

// wait is the only goroutine that waits on the keeper. It publishes the
// result once the keeper reported that no process of the child's is left,
// or once the keeper died without a report and what it left is gone: without
// the keeper, the supervisor kills the child's group and every orphan the
// keeper left (this process is a subreaper, so they are its children now).
func (c *Child) wait(k *keeperProc, status *bufio.Scanner) {
	defer close(c.gone)
	defer k.cg.remove(c.log)
	for status.Scan() {
		if r, err := keeper.ParseReport(status.Text()); err == nil && r.Op == keeper.OpExit {
			// The keeper reports only once nothing it started is left,
			// so the result is final now, once the kernel agrees where
			// it can tell; the keeper's own exit can follow in its
			// time, off the path to the revoke.
			c.log.Trace("keeper reported the exit")
			c.emptyCgroup("after the keeper's report")
			res := Result{Code: r.Code, Reason: r.Reason, Signaled: r.Signaled}
			if c.supervisorFenced() {
				// The child died of this process's fence, which its
				// keeper, stopped till then, took for an end of its own.
				res.Reason, res.Signaled = ReasonFenced, false
			}
			c.publish(res)
			// Read on until the keeper, exiting, closes its end. A read
			// parks on the runtime's poller; a wait for the process
			// blocks its thread, which keeps the term loop that publish
			// just woke from running until the runtime notices.
			for status.Scan() {
			}
			k.stat.Close()
			_ = k.wait()
			return
		}
	}
	k.stat.Close()
	werr := k.wait()
	if c.cg != "" {
		_ = c.cg.Kill()
	}
	o := killOrphans(c.pid)
	if c.supervisorFenced() {
		c.log.Warn("killed the keeper, the child's group and what the keeper left, waiting for them to end", "pgid", c.pid, "bound", orphanWait)
	} else {
		c.log.Error("keeper died without a report; killed the child's group and what the keeper left, waiting for them to end",
			"pgid", c.pid, "error", werr, "bound", orphanWait)
	}
	if subreaperErr != nil {
		c.log.Error("not a child subreaper: what the keeper left went to init, out of reach", "error", subreaperErr)
	}
	if left := o.wait(orphanWait); left > 0 {
		c.log.Error("processes left by the keeper still run after SIGKILL; ending the term without them", "count", left)
	} else {
		c.log.Info("every process the keeper left has ended")
	}
	c.emptyCgroup("after the keeper's death")
	reason := ReasonKeeperLost
	if c.supervisorFenced() {
		reason = ReasonFenced
	}
	c.publish(Result{Code: exitcode.Signal(syscall.SIGKILL), Reason: reason})
}

// emptyCgroup returns once the child's cgroup holds no live process: the
// kernel's word that nothing of the term can run, whatever the keeper
// said. SIGKILL ends a process at once unless it sleeps uninterruptibly in
// the kernel; after orphanWait the term ends without it, as it runs no
// more code of its own.
func (c *Child) emptyCgroup(when string) {
	if c.cg == "" {
		return
	}
	busy, err := c.cg.Populated()
	if !busy && err == nil {
		return
	}
	c.log.Error("the child's cgroup still holds processes "+when+"; killing them", "cgroup", string(c.cg), "error", err)
	_ = c.cg.Kill()
	if !c.cg.Await(orphanWait, c.cg.Empty) {
		c.log.Error("processes in the child's cgroup still run after SIGKILL; ending the term without them", "cgroup", string(c.cg))
	}
}

func (c *Child) publish(res Result) {
	c.mu.Lock()
	c.res = res
	c.ctrl.Close()
	c.ctrl = nil
	c.mu.Unlock()
	close(c.done)
}

// Gone is closed after Done, once the keeper too is gone: reaped, and the
// term's cgroups removed.
func (c *Child) Gone() <-chan struct{} { return c.gone }

// Pid is the direct child's pid, which is also its process group id.
func (c *Child) Pid() int { return c.pid }

// Done is closed once the child's whole group is gone.
func (c *Child) Done() <-chan struct{} { return c.done }

// Result is valid after Done is closed.
func (c *Child) Result() Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.res
}

// SetDeadline moves the fence to a later boot-clock deadline, the
// keeper's and this process's own.
func (c *Child) SetDeadline(d time.Duration) {
	c.send(keeper.Command{Op: keeper.OpDeadline, Deadline: d})
	c.moveFence(d)
}

// Stop sends sig to the group, then SIGKILL after the kill timeout (or at the
// fence, if that comes first).
func (c *Child) Stop(sig syscall.Signal) { c.send(keeper.Command{Op: keeper.OpStop, Sig: sig}) }

// Kill sends SIGKILL to the group at once.
func (c *Child) Kill() { c.send(keeper.Command{Op: keeper.OpKill}) }

// Signal forwards sig to the group.
func (c *Child) Signal(sig syscall.Signal) { c.send(keeper.Command{Op: keeper.OpSignal, Sig: sig}) }

func (c *Child) send(cmd keeper.Command) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctrl == nil {
		return
	}
	// A write only fails when the keeper is gone, which wait() handles.
	_, _ = c.ctrl.WriteString(cmd.String())
}
