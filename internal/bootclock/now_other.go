//go:build !linux

package bootclock

import "time"

var start = time.Now()

// Now is a monotonic reading; without CLOCK_BOOTTIME it stops during suspend.
func Now() time.Duration { return time.Since(start) }
