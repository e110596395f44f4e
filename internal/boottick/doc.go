// Package boottick is a repeating timer on the boot clock for a cadence an
// idle process keeps up for long, such as a leader's renewals: it wakes the
// process once per tick, where a Go timer wakes it more (ticker_linux.go).
package boottick
