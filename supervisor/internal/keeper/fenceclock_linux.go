package keeper

import (
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/internal/bootclock"
)

// fenceClock wakes the keeper when the fence may be due: a boot-clock
// timer, or a tick where the kernel has none.
//
// The timer is on the boot clock (internal/bootclock): the fence must fire
// at once when its time passed while the machine was suspended, and an
// idle keeper sleeps until then instead of polling a clock.
type fenceClock struct {
	timer *bootclock.Timer
	tick  *time.Ticker
	wake  <-chan struct{}
	ticks <-chan time.Time
}

func newFenceClock(log hclog.Logger) *fenceClock {
	wake := make(chan struct{}, 1)
	timer, err := bootclock.NewTimer(func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}, nil)
	if err != nil {
		log.Error("no boot-clock timer; checking the fence on a tick", "error", err)
		t := time.NewTicker(Tick)
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
