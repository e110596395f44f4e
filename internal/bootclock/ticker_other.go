//go:build !linux

package bootclock

import "time"

// Ticker is a time.Ticker where there is no boot clock (see
// ticker_linux.go).
type Ticker struct {
	C <-chan time.Time
	t *time.Ticker
}

// NewTicker starts a Ticker of period d > 0; Stop ends it.
func NewTicker(d time.Duration) *Ticker {
	t := time.NewTicker(d)
	return &Ticker{C: t.C, t: t}
}

// Stop ends the ticks.
func (t *Ticker) Stop() { t.t.Stop() }
