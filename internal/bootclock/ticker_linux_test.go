package bootclock

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func awaitTicks(t *testing.T, c <-chan time.Time, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-c:
		case <-time.After(20 * time.Second):
			t.Fatalf("%d ticks within the safety timeout, want %d", i, n)
		}
	}
}

// A Ticker ticks on a timerfd of the boot clock, read through the
// runtime's poller, not on a Go timer (ticker_linux.go says why), and Stop
// closes it.
func TestTickerIsABootClockTimerfd(t *testing.T) {
	tk := NewTicker(5 * time.Millisecond)
	if tk.tm == nil {
		t.Fatal("the ticker fell back to a Go timer: no timerfd")
	}
	rc, err := tk.tm.f.SyscallConn() // unlike Fd, leaves the file non-blocking
	if err != nil {
		t.Fatal(err)
	}
	var fd uintptr
	if err := rc.Control(func(f uintptr) { fd = f }); err != nil {
		t.Fatal(err)
	}
	info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	if err != nil {
		t.Fatal(err)
	}
	// CLOCK_BOOTTIME is clock 7; a periodic timer has a non-zero interval.
	if s := string(info); !strings.Contains(s, "clockid: 7\n") || strings.Contains(s, "it_interval: (0, 0)") {
		t.Fatalf("fd %d is not a periodic timerfd on the boot clock:\n%s", fd, s)
	}
	awaitTicks(t, tk.C, 3)
	tk.Stop()
	tk.Stop()
	if _, err := tk.tm.f.Read(make([]byte, 8)); err == nil {
		t.Fatal("the timerfd is still open after Stop")
	}
}

// A read of the timer that fails for any reason but Stop (here a file at
// its end) does not end the ticks: they go on from a Go timer until Stop.
func TestTickerGoesOnAfterAFailedRead(t *testing.T) {
	name := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(name, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	c := make(chan time.Time, 1)
	tm := &Timer{fd: -1, f: f}
	tk := &Ticker{C: c, d: 5 * time.Millisecond, tm: tm, stop: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		tm.read(func() { send(c, time.Now()) }, func() { tk.onGoTimer(c) })
		close(done)
	}()
	awaitTicks(t, tk.C, 3)
	tk.Stop()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the ticks went on after Stop")
	}
}
