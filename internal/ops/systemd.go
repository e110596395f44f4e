package ops

import (
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notify sends a state to systemd when etcdlead runs as Type=notify; it is
// a no-op elsewhere (no NOTIFY_SOCKET).
func Notify(state string) { _, _ = daemon.SdNotify(false, state) }

// Watchdog pings systemd at half of WatchdogSec, but only while healthy
// (etcd answered within one TTL): a supervisor that cannot reach etcd
// should be restarted by systemd rather than pretend to be well. It
// returns a stop function.
func Watchdog(healthy func() bool) func() {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(interval / 2)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if healthy() {
					Notify("WATCHDOG=1")
				}
			}
		}
	}()
	return func() { close(done) }
}
