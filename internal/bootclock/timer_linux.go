package bootclock

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Timer is a timerfd on CLOCK_BOOTTIME, read through the runtime's poller:
// the keeper's fence (supervisor) and a leader's renewals (Ticker) both
// wait on one.
//
// The boot clock keeps counting while the machine is suspended, so a time
// that passed during a suspend fires at the resume; Go's timers run on the
// monotonic clock, which stops. The file is non-blocking, so that its
// reader waits in the poller like any other file, and an idle process
// sleeps until the timer is due instead of polling a clock.
type Timer struct {
	fd int
	f  *os.File
}

// NewTimer opens a disarmed Timer and reads it: fire runs at each expiry
// (expiries that come together run it once), and failed, if not nil, if a
// read fails for another reason than Close, after which nothing fires.
func NewTimer(fire, failed func()) (*Timer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_BOOTTIME, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "timerfd")
	// A file the poller did not take has no deadlines; its reads would fail
	// at once.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		_ = f.Close()
		return nil, err
	}
	t := &Timer{fd: fd, f: f}
	go t.read(fire, failed)
	return t, nil
}

func (t *Timer) read(fire, failed func()) {
	buf := make([]byte, 8) // the count of expiries; any is one firing
	for {
		if _, err := t.f.Read(buf); err != nil {
			if failed != nil && !errors.Is(err, os.ErrClosed) {
				failed()
			}
			return
		}
		fire()
	}
}

// At arms the Timer for boot-clock time d; 0 disarms it. A time already
// past fires at once.
func (t *Timer) At(d time.Duration) {
	spec := unix.ItimerSpec{}
	if d > 0 {
		spec.Value = unix.NsecToTimespec(int64(d))
	}
	_ = unix.TimerfdSettime(t.fd, unix.TFD_TIMER_ABSTIME, &spec, nil)
}

// Every arms the Timer to fire every d from now.
func (t *Timer) Every(d time.Duration) error {
	every := unix.NsecToTimespec(int64(d))
	return unix.TimerfdSettime(t.fd, 0, &unix.ItimerSpec{Value: every, Interval: every}, nil)
}

// Close ends the Timer and its reader.
func (t *Timer) Close() { _ = t.f.Close() }
