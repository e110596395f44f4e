package supervisor

import (
	"errors"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The supervisor's wait on its keeper waits in the runtime's poller, not
// blocked in the kernel: with etcdlead's one P (main.go), a goroutine
// blocked in wait4 or waitid holds the P, and the revoke that ends a term
// waits for the runtime to take it back. The process is left for the
// caller to reap, with its status.
func TestAwaitExitWaitsInThePoller(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	done := make(chan struct{})
	go func() {
		defer close(done)
		awaitExit(cmd.Process.Pid)
	}()

	state := ""
	for deadline := time.Now().Add(10 * time.Second); state != "IO wait"; {
		select {
		case <-done:
			t.Fatal("awaitExit returned while the process still runs")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiting goroutine was never parked in the poller; last seen in state %q", state)
		}
		state = awaitExitState()
		if state == "syscall" {
			t.Fatal("the waiting goroutine is blocked in a system call, holding its P")
		}
		time.Sleep(time.Millisecond)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("awaitExit did not return after the process ended")
	}
	var ee *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("the caller's wait: %v, want the process's own end by SIGTERM", err)
	}
}

// awaitExitState is the scheduler state of the goroutine inside awaitExit
// ("IO wait", "syscall", "runnable"...), or "" if there is none.
func awaitExitState() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if !strings.Contains(g, "supervisor.awaitExit(") {
			continue
		}
		head, _, _ := strings.Cut(g, "\n")
		_, state, ok := strings.Cut(head, "[")
		if !ok {
			return ""
		}
		state, _, _ = strings.Cut(state, "]")
		state, _, _ = strings.Cut(state, ",")
		return state
	}
	return ""
}
