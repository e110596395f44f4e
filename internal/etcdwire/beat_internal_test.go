package etcdwire

import (
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/bootclock"
)

// One beat per client and interval: every subscriber hears each tick; the
// ticker runs only while someone listens, and starts again for the next.
func TestBeatShared(t *testing.T) {
	rs := &Renewals{}
	const r = 20 * time.Millisecond
	b := rs.Beat(r, bootclock.Now)
	if rs.Beat(r, bootclock.Now) != b || rs.Beat(2*r, bootclock.Now) == b {
		t.Fatal("one beat per interval on a client")
	}
	before := bootclock.Now()
	c1, next, stop1 := b.Subscribe()
	c2, _, stop2 := b.Subscribe()
	if next < before+r || next > bootclock.Now()+r {
		t.Errorf("next tick at %v, want about %v after the start %v", next, r, before)
	}
	for _, c := range []<-chan struct{}{c1, c2, c1, c2} {
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatal("a subscriber heard no tick")
		}
	}
	stop1()
	stop2()
	b.mu.Lock()
	done := b.done
	b.mu.Unlock()
	select {
	case <-done:
	default:
		t.Fatal("the beat still runs with no subscriber")
	}
	c3, _, stop3 := b.Subscribe()
	defer stop3()
	select {
	case <-c3:
	case <-time.After(10 * time.Second):
		t.Fatal("a beat started again does not tick")
	}
}
