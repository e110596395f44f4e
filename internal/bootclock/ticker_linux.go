package bootclock

import (
	"sync"
	"time"
)

// Ticker ticks every period of CLOCK_BOOTTIME, for a cadence that an idle
// process keeps up for long (a leader's renewals). It is read like a
// time.Ticker: a tick that finds C full is dropped, so a slow reader gets
// one tick, not a backlog.
//
// On the boot clock, a tick that fell due during a suspend comes at the
// resume, as the lease's own time ran on in etcd meanwhile.
type Ticker struct {
	C    <-chan time.Time
	d    time.Duration
	tm   *Timer       // nil with t
	t    *time.Ticker // where the kernel gives no timerfd the poller can wait on
	stop chan struct{}
	once sync.Once
}

// NewTicker starts a Ticker of period d > 0; Stop ends it.
func NewTicker(d time.Duration) *Ticker {
	if d <= 0 {
		panic("bootclock: NewTicker with a period that is not positive")
	}
	c := make(chan time.Time, 1)
	t := &Ticker{C: c, d: d, stop: make(chan struct{})}
	tm, err := NewTimer(func() { send(c, time.Now()) }, func() { t.onGoTimer(c) })
	if err == nil {
		if err = tm.Every(d); err != nil {
			tm.Close()
		}
	}
	if err != nil {
		gt := time.NewTicker(d)
		return &Ticker{C: gt.C, d: d, t: gt}
	}
	t.tm = tm
	return t
}

// send drops a tick that finds c full, as a time.Ticker does.
func send(c chan<- time.Time, now time.Time) {
	select {
	case c <- now:
	default:
	}
}

// onGoTimer keeps the ticks coming from a Go timer until Stop, once the
// timer could not be read: the cadence must not simply stop, or its
// reader (a leader's renewals) would wait for ever.
func (t *Ticker) onGoTimer(c chan<- time.Time) {
	tk := time.NewTicker(t.d)
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			return
		case now := <-tk.C:
			send(c, now)
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
		t.tm.Close()
	})
}
