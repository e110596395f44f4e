package etcdwire

import (
	"sync"
	"time"

	"github.com/etcdlead/etcdlead/internal/bootclock"
)

// A Beat is one boot-clock ticker of period r shared by every leader that
// renews every r over one client (Renewals.Beat): their renewals go out
// together, as clientv3's own keep-alive loop sends its leases', so that a
// client with many terms wakes once per r instead of once per term, and
// its renewals leave, and their answers come back, in a few writes rather
// than one each. A term's attempts still follow one another by r at most
// (campaign/lead.go), so sharing the beat costs no outage tolerance.
type Beat struct {
	r   time.Duration
	now func() time.Duration

	mu   sync.Mutex
	subs map[chan struct{}]struct{}
	last time.Duration // boot-clock time of the last tick, or of the start
	tick *bootclock.Ticker
	done chan struct{}
}

// Beat returns the beat of period r on this client, started on its first
// subscriber and stopped after its last.
func (rs *Renewals) Beat(r time.Duration, now func() time.Duration) *Beat {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.beats == nil {
		rs.beats = map[time.Duration]*Beat{}
	}
	b, ok := rs.beats[r]
	if !ok {
		b = &Beat{r: r, now: now, subs: map[chan struct{}]struct{}{}}
		rs.beats[r] = b
	}
	return b
}

// Subscribe returns a channel that receives at each tick (a tick missed by
// a slow receiver is dropped, not queued), the boot-clock time of the next
// tick as things stand, and a function that ends the subscription.
func (b *Beat) Subscribe() (<-chan struct{}, time.Duration, func()) {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.subs) == 0 {
		b.last = b.now()
		b.tick = bootclock.NewTicker(b.r)
		b.done = make(chan struct{})
		go b.run(b.tick, b.done)
	}
	b.subs[ch] = struct{}{}
	return ch, b.last + b.r, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.subs, ch)
		if len(b.subs) == 0 {
			b.tick.Stop()
			close(b.done)
		}
	}
}

func (b *Beat) run(tick *bootclock.Ticker, done chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		b.mu.Lock()
		b.last = b.now()
		for ch := range b.subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		b.mu.Unlock()
	}
}
