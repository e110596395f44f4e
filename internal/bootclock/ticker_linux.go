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
//
// The Tickers of one period share one timerfd and one reader: a process
// that leads many elections (one per term) would otherwise be woken once
// per term and period, by a timer each, where one wake-up serves them all,
// and the renewals they start leave together, in fewer writes. So the
// first tick of a Ticker comes within one period of NewTicker, not exactly
// one period after it; the period between ticks is d.
type Ticker struct {
	C    <-chan time.Time
	c    chan time.Time
	d    time.Duration
	s    *shared      // nil with t
	t    *time.Ticker // where the kernel gives no timerfd the poller can wait on
	once sync.Once
}

// shared is the one timer of every live Ticker of period d.
type shared struct {
	d    time.Duration
	tm   *Timer
	stop chan struct{}
	subs map[*Ticker]struct{} // guarded by tickers.mu
}

// tickers holds the shared timers by period, while a Ticker uses them.
var tickers struct {
	mu       sync.Mutex
	byPeriod map[time.Duration]*shared
}

// NewTicker starts a Ticker of period d > 0; Stop ends it.
func NewTicker(d time.Duration) *Ticker {
	if d <= 0 {
		panic("bootclock: NewTicker with a period that is not positive")
	}
	c := make(chan time.Time, 1)
	t := &Ticker{C: c, c: c, d: d}
	tickers.mu.Lock()
	defer tickers.mu.Unlock()
	s := tickers.byPeriod[d]
	if s == nil {
		var err error
		if s, err = newShared(d); err != nil {
			gt := time.NewTicker(d)
			return &Ticker{C: gt.C, d: d, t: gt}
		}
		if tickers.byPeriod == nil {
			tickers.byPeriod = map[time.Duration]*shared{}
		}
		tickers.byPeriod[d] = s
	}
	s.subs[t] = struct{}{}
	t.s = s
	return t
}

// newShared opens the timer of period d; the caller holds tickers.mu.
func newShared(d time.Duration) (*shared, error) {
	s := &shared{d: d, stop: make(chan struct{}), subs: map[*Ticker]struct{}{}}
	tm, err := NewTimer(func() { s.tick(time.Now()) }, s.onGoTimer)
	if err != nil {
		return nil, err
	}
	if err := tm.Every(d); err != nil {
		tm.Close()
		return nil, err
	}
	s.tm = tm
	return s, nil
}

// tick hands now to every Ticker of s.
func (s *shared) tick(now time.Time) {
	tickers.mu.Lock()
	defer tickers.mu.Unlock()
	for t := range s.subs {
		send(t.c, now)
	}
}

// send drops a tick that finds c full, as a time.Ticker does.
func send(c chan<- time.Time, now time.Time) {
	select {
	case c <- now:
	default:
	}
}

// onGoTimer keeps the ticks coming from a Go timer until the last Ticker
// of s stops, once the timer could not be read: the cadence must not
// simply stop, or its readers (leaders' renewals) would wait for ever.
func (s *shared) onGoTimer() {
	tk := time.NewTicker(s.d)
	defer tk.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-tk.C:
			s.tick(now)
		}
	}
}

// Stop ends the ticks; a tick under way as it is called may still arrive.
// It may be called more than once. The shared timer closes with the last
// Ticker of its period.
func (t *Ticker) Stop() {
	if t.t != nil {
		t.t.Stop()
		return
	}
	t.once.Do(func() {
		s := t.s
		tickers.mu.Lock()
		delete(s.subs, t)
		last := len(s.subs) == 0
		if last {
			delete(tickers.byPeriod, s.d)
		}
		tickers.mu.Unlock()
		if last {
			close(s.stop)
			s.tm.Close()
		}
	})
}
