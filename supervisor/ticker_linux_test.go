package supervisor

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// A Ticker ticks on a timerfd of the boot clock, read through the
// runtime's poller, not on a Go timer (ticker_linux.go says why), and its
// reader ends with Stop.
func TestTickerIsABootClockTimerfd(t *testing.T) {
	tk := NewTicker(5 * time.Millisecond)
	if tk.f == nil {
		t.Fatal("the ticker fell back to a Go timer: no timerfd")
	}
	fd := tk.f.Fd()
	info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	if err != nil {
		t.Fatal(err)
	}
	// CLOCK_BOOTTIME is clock 7; a periodic timer has a non-zero interval.
	if s := string(info); !strings.Contains(s, "clockid: 7\n") || strings.Contains(s, "it_interval: (0, 0)") {
		t.Fatalf("fd %d is not a periodic timerfd on the boot clock:\n%s", fd, s)
	}
	for i := range 3 {
		select {
		case <-tk.C:
		case <-time.After(20 * time.Second):
			t.Fatalf("%d ticks of 5ms within the safety timeout, want 3", i)
		}
	}
	tk.Stop()
	if _, err := tk.f.Read(make([]byte, 8)); err == nil {
		t.Fatal("the timerfd is still open after Stop")
	}
}
