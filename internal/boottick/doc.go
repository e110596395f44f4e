// Package boottick holds timers on the boot clock, which keeps counting
// while the machine is suspended: the fence timers (timer_linux.go) and the
// ticker of a leader's renewals (ticker_linux.go). It runs in the
// supervisor and in the keeper.
package boottick
