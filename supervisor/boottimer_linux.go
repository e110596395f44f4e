package supervisor

import (
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/internal/boottick"
)

// fenceClock wakes the keeper when the fence may be due: a boot-clock
// timer, or a tick where the kernel has none.
//
// The timer is on the boot clock (internal/boottick): the fence must fire
// at once when its time passed while the machine was suspended, and an
// idle keeper sleeps until then instead of polling a clock.
type fenceClock struct {
	timer *boottick.Timer
	tick  *time.Ticker
	wake  <-chan struct{}
	ticks <-chan time.Time
}

func newFenceClock(log hclog.Logger) *fenceClock {
	wake := make(chan struct{}, 1)
	timer, err := boottick.NewTimer(func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}, nil)
	if err != nil {
		log.Error("no boot-clock timer; checking the fence on a tick", "error", err)
		t := time.NewTicker(keeperTick)
		return &fenceClock{tick: t, ticks: t.C}
	}
	return &fenceClock{timer: timer, wake: wake}
}

// arm sets the timer for boot-clock time at (0: nothing scheduled).
func (c *fenceClock) arm(at time.Duration) {
	if c.timer != nil {
		c.timer.At(at)
	}
}

func (c *fenceClock) close() {
	if c.timer != nil {
		c.timer.Close()
	} else {
		c.tick.Stop()
	}
}
