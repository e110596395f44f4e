package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// openPTY opens a pseudo-terminal pair: the master side, which the test
// types into, and the terminal a process gets as its stdin.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return master, tty
}

// Ctrl-C on the terminal, with --restart=always: the terminal's SIGINT
// reaches the child, which has the terminal's foreground; etcdlead then
// ends with 130 rather than start the command again.
func TestCtrlCOnTerminalEndsRestartAlways(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	master, tty := openPTY(t)
	args := append([]string{"run", "--endpoints=" + strings.Join(e.endpoints, ","), "--prefix=" + e.prefix,
		"--election=tty", "--restart=always", "--"}, e.probe()...)
	cmd := exec.Command(etcdleadBin(), args...)
	cmd.Stdin = tty
	// A session of its own with the terminal as its controlling terminal,
	// as a login shell's job would have.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = stdoutW, stderrW
	out, log := newLines(stdoutR), newLines(stderrR)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdoutW.Close()
	stderrW.Close()
	done := make(chan int, 1)
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			done <- ee.ExitCode()
		case err != nil:
			done <- -1
		default:
			done <- 0
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", out, log)
		}
	})
	out.waitFor(t, "etcdlead", "ready", 0)
	if _, err := master.Write([]byte{0x03}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	out.waitFor(t, "etcdlead", "signal SIGINT", 0)
	select {
	case code := <-done:
		if code != 130 {
			t.Errorf("exit %d, want 130", code)
		}
	case <-time.After(safety):
		t.Fatalf("etcdlead still runs after Ctrl-C; it said:\n%s", log)
	}
	if runs := e.jobRuns(t); runs != 1 {
		t.Errorf("the command ran %d times, want once", runs)
	}
}
