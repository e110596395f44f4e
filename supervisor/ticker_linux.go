package supervisor

import (
	"os"
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
	C <-chan time.Time
	f *os.File     // the timerfd; nil with t
	t *time.Ticker // where the kernel gives no timerfd
}

// NewTicker starts a Ticker of period d > 0; Stop ends it.
func NewTicker(d time.Duration) *Ticker {
	if d <= 0 {
		panic("supervisor: NewTicker with a period that is not positive")
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_BOOTTIME, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK)
	if err == nil {
		every := unix.NsecToTimespec(int64(d))
		if err = unix.TimerfdSettime(fd, 0, &unix.ItimerSpec{Value: every, Interval: every}, nil); err != nil {
			_ = unix.Close(fd)
		}
	}
	if err != nil {
		t := time.NewTicker(d)
		return &Ticker{C: t.C, t: t}
	}
	c := make(chan time.Time, 1)
	// Non-blocking, so that the read waits in the runtime's poller rather
	// than holding a thread (and, in a process with one P, its P).
	t := &Ticker{C: c, f: os.NewFile(uintptr(fd), "ticker")}
	go t.read(c)
	return t
}

func (t *Ticker) read(c chan<- time.Time) {
	buf := make([]byte, 8) // the count of periods that passed; any is one tick
	for {
		if _, err := t.f.Read(buf); err != nil {
			return // stopped
		}
		select {
		case c <- time.Now():
		default:
		}
	}
}

// Stop ends the ticks; a tick under way as it is called may still arrive.
func (t *Ticker) Stop() {
	if t.t != nil {
		t.t.Stop()
		return
	}
	_ = t.f.Close()
}
