package supervisor

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The keeper's reach: a stderr that does not drain, descendants that leave
// the child's group, keepers that die, a fence point already passed. The
// helpers read /proc on their own, apart from the code under test.

// fullPipe returns a pipe filled until a write would block, with its write
// end back in blocking mode, as a stalled log reader leaves stderr.
func fullPipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(p[1], true); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for _, size := range []int{4096, 1} {
		for {
			if _, err := unix.Write(p[1], chunk[:size]); err != nil {
				break
			}
		}
	}
	if err := unix.SetNonblock(p[1], false); err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(p[0]), "stderr-r"), os.NewFile(uintptr(p[1]), "stderr-w")
}

// drainer reads a pipe to its end, once, whoever asks first.
type drainer struct {
	once sync.Once
	r    *os.File
	buf  bytes.Buffer
	done chan struct{}
}

func (d *drainer) start() {
	d.once.Do(func() {
		go func() {
			_, _ = io.Copy(&d.buf, d.r)
			d.r.Close()
			close(d.done)
		}()
	})
}

// exitsBy waits until process pid has exited (a zombie counts), or until
// boot-clock time at.
func exitsBy(t *testing.T, pid int, at time.Duration) bool {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true
	}
	if err != nil {
		t.Fatalf("pidfd_open(%d): %v", pid, err)
	}
	defer unix.Close(fd)
	ms := max(int((at-Now())/time.Millisecond), 0)
	n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
	return err == nil && n == 1
}

// A stderr that nobody reads, full to the brim: the fence still stops the
// child by its SIGKILL point, and the log line that says so arrives once
// stderr is drained.
func TestFenceNotHeldUpByBlockedStderr(t *testing.T) {
	r, w := fullPipe(t)
	d := &drainer{r: r, done: make(chan struct{})}
	f := Fence{Deadline: Now() + 2*time.Second, KillTimeout: time.Second, Margin: 100 * time.Millisecond}
	s := startHelper(t, "sleep", func(sp *Spec) {
		sp.Stderr, sp.LogLevel = w, "info"
		sp.Deadline, sp.KillTimeout, sp.FenceMargin = f.Deadline, f.KillTimeout, f.Margin
	})
	w.Close()
	t.Cleanup(d.start) // a keeper stuck on stderr would never end otherwise
	s.expect(t, "ready")
	if !exitsBy(t, s.c.Pid(), f.KillAt()) {
		t.Fatalf("child %d still runs at its SIGKILL point: the fence waits on a log write", s.c.Pid())
	}
	d.start()
	if got := s.result(t); got != (Result{Code: 143, Reason: ReasonFenced}) {
		t.Fatalf("got %+v, want 143 fenced", got)
	}
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		t.Fatal("stderr not closed within the safety timeout: the keeper lives on")
	}
	if out := d.buf.String(); !strings.Contains(out, "fence: lease deadline near") {
		t.Fatalf("the fence's log line never came out; stderr ended with:\n%q", out[max(len(out)-2000, 0):])
	}
}
