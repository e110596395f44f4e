package supervisor

import (
	"time"

	"golang.org/x/sys/unix"
)

// bootTimer fires at absolute points of CLOCK_BOOTTIME. Go's timers run on
// the monotonic clock, which stops while the machine is suspended, so a
// sleep until the fence would wake late after a resume; a timerfd on the
// boot clock fires at once when its time passed during suspend. It also
// keeps an idle keeper asleep instead of polling the clock.
type bootTimer struct {
	fd int
	C  chan struct{}
}

func newBootTimer() (*bootTimer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_BOOTTIME, unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	t := &bootTimer{fd: fd, C: make(chan struct{}, 1)}
	go t.read()
	return t, nil
}

func (t *bootTimer) read() {
	buf := make([]byte, 8)
	for {
		if _, err := unix.Read(t.fd, buf); err != nil {
			if err == unix.EINTR || err == unix.EAGAIN {
				continue
			}
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

func (t *bootTimer) close() { unix.Close(t.fd) }
