// Package boottick holds timers on the boot clock read through the
// runtime's poller (timer_linux.go): the keeper's fence timer, and the
// ticker of a leader's renewals, which wakes an idle process once per tick
// where a Go timer wakes it more (ticker_linux.go).
package boottick
