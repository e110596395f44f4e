package campaign

import (
	"testing"
	"time"
)

// A new leader's first renewal comes r after the term's last credited
// send (the grant, or its last renewal while waiting), or at once when
// that is past: not r after Lead starts, which would take the time between
// that send and Lead from the room a round trip has before the fence
// point. Whenever the fence point is less than 3r ahead, that is at once.
func TestFirstRenewal(t *testing.T) {
	const now = 100 * time.Second
	for _, c := range []struct {
		name     string
		ttl      time.Duration // the term's; r = DefaultRenewInterval(ttl)
		k, m     time.Duration // as ResolveTiming fills them in
		sent     time.Duration // the last credited send, before now
		deadline time.Duration // what the answer gave: sent + the TTL etcd answered
		want     time.Duration
	}{
		{"granted just before Lead, TTL 2s", 2 * time.Second, 500 * time.Millisecond, 250 * time.Millisecond,
			now - 20*time.Millisecond, now - 20*time.Millisecond + 2*time.Second, now + 180*time.Millisecond},
		{"granted r ago to the nanosecond, TTL 2s", 2 * time.Second, 500 * time.Millisecond, 250 * time.Millisecond,
			now - 200*time.Millisecond, now - 200*time.Millisecond + 2*time.Second, now},
		{"waiter renewed T/3 ago, TTL 15s", 15 * time.Second, 5 * time.Second, 750 * time.Millisecond,
			now - 5*time.Second, now - 5*time.Second + 15*time.Second, now},
		{"granted half an r ago, TTL 30s", 30 * time.Second, 5 * time.Second, 1500 * time.Millisecond,
			now - 500*time.Millisecond, now - 500*time.Millisecond + 30*time.Second, now + 500*time.Millisecond},
		{"fence point passed, TTL 2s", 2 * time.Second, 500 * time.Millisecond, 250 * time.Millisecond,
			now - 1500*time.Millisecond, now + 500*time.Millisecond, now},
		// The cadence counts from the send itself, whatever TTL the answer
		// gave: Deadline - TTL would put this send a second later.
		{"etcd answered more than the term's TTL", 2 * time.Second, 500 * time.Millisecond, 250 * time.Millisecond,
			now - 150*time.Millisecond, now - 150*time.Millisecond + 3*time.Second, now + 50*time.Millisecond},
	} {
		term := &Term{c: &Campaigner{cfg: Config{Timing: Timing{KillTimeout: c.k, FenceMargin: c.m}}}, TTL: c.ttl}
		term.dl.Store(int64(c.deadline))
		term.sentAt.Store(int64(c.sent))
		r := DefaultRenewInterval(c.ttl)
		got := term.firstRenewal(now, r)
		if got != c.want {
			t.Errorf("%s: first renewal %v after now, want %v", c.name, got-now, c.want-now)
		}
		// The rule it replaced: at once when the fence point is less than
		// 3r ahead. Where that holds, this is at once too.
		if term.fence().SignalAt()-now < 3*r && got != now {
			t.Errorf("%s: the fence point is less than 3r ahead, but the first renewal waits %v", c.name, got-now)
		}
	}
}
