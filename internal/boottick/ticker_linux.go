package boottick

import (
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Ticker ticks every period of CLOCK_BOOTTIME, for a cadence that an idle
// process keeps up for long (a leader's renewals). It is read like a
// time.Ticker: a tick that finds C full is dropped, so a slow reader gets
// one tick, not a backlog.
//
// A Go timer costs an idle process more than its tick: the runtime's
// poller sleeps in whole milliseconds, rounded down, so it wakes before the
// timer is due and sleeps again, and the runtime's monitor thread (sysmon)
// wakes at the timer too and polls every few microseconds until the timer
// has run. A timerfd read through the poller wakes the process once, when
// it is due, and leaves the monitor asleep until the process runs. On the
// boot clock, a tick that fell due during a suspend comes at the resume.
type Ticker struct {
	C    <-chan time.Time
	d    time.Duration
	f    *os.File     // the timerfd; nil with t
	t    *time.Ticker // where the kernel gives no timerfd the poller can wait on
	stop chan struct{}
	once sync.Once
}

// New starts a Ticker of period d > 0; Stop ends it.
func New(d time.Duration) *Ticker {
	if d <= 0 {
		panic("boottick: New with a period that is not positive")
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_BOOTTIME, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK)
	if err == nil {
		every := unix.NsecToTimespec(int64(d))
		if err = unix.TimerfdSettime(fd, 0, &unix.ItimerSpec{Value: every, Interval: every}, nil); err != nil {
			_ = unix.Close(fd)
		}
	}
	var f *os.File
	if err == nil {
		// Non-blocking, so that the read waits in the runtime's poller
		// rather than holding a thread (and, in a process with one P, its
		// P). A file the poller did not take has no deadlines; its reads
		// would fail at once.
		f = os.NewFile(uintptr(fd), "ticker")
		if err = f.SetReadDeadline(time.Time{}); err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		t := time.NewTicker(d)
		return &Ticker{C: t.C, d: d, t: t}
	}
	c := make(chan time.Time, 1)
	t := &Ticker{C: c, d: d, f: f, stop: make(chan struct{})}
	go t.read(c)
	return t
}

func (t *Ticker) read(c chan<- time.Time) {
	buf := make([]byte, 8) // the count of periods that passed; any is one tick
	for {
		if _, err := t.f.Read(buf); err != nil {
			if !errors.Is(err, os.ErrClosed) {
				// The cadence must not simply stop: its reader (a
				// leader's renewals) would wait for ever.
				t.onGoTimer(c)
			}
			return
		}
		select {
		case c <- time.Now():
		default:
		}
	}
}

// onGoTimer keeps the ticks coming from a Go timer until Stop.
func (t *Ticker) onGoTimer(c chan<- time.Time) {
	tk := time.NewTicker(t.d)
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			return
		case now := <-tk.C:
			select {
			case c <- now:
			default:
			}
		}
	}
}

// Stop ends the ticks; a tick under way as it is called may still arrive.
// It may be called more than once.
func (t *Ticker) Stop() {
	if t.t != nil {
		t.t.Stop()
		return
	}
	t.once.Do(func() {
		close(t.stop)
		_ = t.f.Close()
	})
}
