package supervisor

import (
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// bootTimer fires at absolute points of CLOCK_BOOTTIME. Go's timers run on
// the monotonic clock, which stops while the machine is suspended, so a
// sleep until the fence would wake late after a resume; a timerfd on the
// boot clock fires at once when its time passed during suspend. It also
// keeps an idle keeper asleep instead of polling the clock.
type bootTimer struct {
	fd int
	f  *os.File // fd, read through the runtime's poller
	C  chan struct{}
}

// newBootTimer opens the timer non-blocking, so that its reader waits in
// the runtime's poller: a read blocked in the kernel would hold the
// keeper's one P (keeper_linux.go) after each firing, and the loop it
// just woke could not run until the runtime took the P back.
func newBootTimer() (*bootTimer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_BOOTTIME, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	t := &bootTimer{fd: fd, f: os.NewFile(uintptr(fd), "timerfd"), C: make(chan struct{}, 1)}
	go t.read()
	return t, nil
}

func (t *bootTimer) read() {
	buf := make([]byte, 8)
	for {
		if _, err := t.f.Read(buf); err != nil {
			return // closed
		}
		select {
		case t.C <- struct{}{}:
		default:
		}
	}
}

// at arms the timer for boot-clock time d; 0 disarms it. A time already
// past fires at once.
func (t *bootTimer) at(d time.Duration) {
	spec := unix.ItimerSpec{}
	if d > 0 {
		spec.Value = unix.NsecToTimespec(int64(d))
	}
	_ = unix.TimerfdSettime(t.fd, unix.TFD_TIMER_ABSTIME, &spec, nil)
}

func (t *bootTimer) close() { t.f.Close() }

// fenceClock wakes the keeper when the fence may be due: a boot-clock
// timer, or a tick where the kernel has none.
type fenceClock struct {
	timer *bootTimer
	tick  *time.Ticker
	wake  <-chan struct{}
	ticks <-chan time.Time
}

func newFenceClock(log hclog.Logger) *fenceClock {
	timer, err := newBootTimer()
	if err != nil {
		log.Error("no boot-clock timer; checking the fence on a tick", "error", err)
		t := time.NewTicker(keeperTick)
		return &fenceClock{tick: t, ticks: t.C}
	}
	return &fenceClock{timer: timer, wake: timer.C}
}

// arm sets the timer for boot-clock time at (0: nothing scheduled).
func (c *fenceClock) arm(at time.Duration) {
	if c.timer != nil {
		c.timer.at(at)
	}
}

func (c *fenceClock) close() {
	if c.timer != nil {
		c.timer.close()
	} else {
		c.tick.Stop()
	}
}
