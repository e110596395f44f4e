package bootclock

import (
	"time"

	"golang.org/x/sys/unix"
)

// Now reads CLOCK_BOOTTIME. Go's own timers use the monotonic clock, which
// stops while the machine is suspended; a lease in etcd does not. Deadlines
// shared between the supervisor and the keeper are points on this clock.
func Now() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		// CLOCK_BOOTTIME exists since Linux 2.6.39; failing here means a
		// broken kernel, and a monotonic reading is the closest safe answer.
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	}
	return time.Duration(ts.Nano())
}
