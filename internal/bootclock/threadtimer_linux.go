package bootclock

import (
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ThreadTimer runs fire at a boot-clock time on an OS thread of its own,
// blocked in a read of a timerfd: when the time comes, the kernel wakes
// that very thread, and the SIGKILL of the fence goes out from there. A
// fence that waited for its turn in a loop, or for the runtime to hand its
// wake-up from the poller to a goroutine, would wait once per hand-off for
// CPU, which a tree that forks without pause takes from every process on
// the machine, the fencer's too (docs/design.md, "Containment"). Where
// this process may, that thread is also put in the lowest real-time class:
// woken, it runs before every ordinary thread on its CPU, however many
// there are; where it may not, it waits its turn as one of them.
type ThreadTimer struct {
	fd   int
	mu   sync.Mutex
	done bool
	at   time.Duration
	// Realtime is why the thread is not in the real-time class, or nil.
	Realtime error
}

// NewThreadTimer starts a disarmed ThreadTimer; fire runs on its thread each
// time an armed time passes (one that runs as Close is called may finish
// after it).
func NewThreadTimer(fire func()) (*ThreadTimer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_BOOTTIME, unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	t := &ThreadTimer{fd: fd}
	started := make(chan struct{})
	go func() {
		// Locked and never unlocked, the thread ends with the goroutine:
		// its class is never lent to other code.
		runtime.LockOSThread()
		t.Realtime = realtime()
		close(started)
		buf := make([]byte, 8)
		for {
			_, err := unix.Read(t.fd, buf)
			t.mu.Lock()
			if t.done {
				t.mu.Unlock()
				unix.Close(t.fd)
				return
			}
			due := err == nil && t.at != 0 && Now() >= t.at
			if due {
				t.at = 0
			}
			t.mu.Unlock()
			if due {
				fire()
			}
		}
	}()
	<-started
	return t, nil
}

// realtime puts the calling thread in SCHED_FIFO at the lowest priority,
// reset on fork, so that no thread or process made from it inherits it.
// It needs CAP_SYS_NICE, or an RLIMIT_RTPRIO above zero.
func realtime() error {
	return unix.SchedSetAttr(0, &unix.SchedAttr{
		Policy: unix.SCHED_FIFO, Priority: 1, Flags: unix.SCHED_FLAG_RESET_ON_FORK,
	}, 0)
}

// At sets the time at which fire runs (0: none); a later call replaces it.
func (t *ThreadTimer) At(at time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done || at == t.at {
		return
	}
	t.at = at
	t.set(at)
}

func (t *ThreadTimer) set(at time.Duration) {
	spec := unix.ItimerSpec{}
	if at > 0 {
		spec.Value = unix.NsecToTimespec(int64(at))
	}
	_ = unix.TimerfdSettime(t.fd, unix.TFD_TIMER_ABSTIME, &spec, nil)
}

// Close ends the timer: closing a descriptor does not wake a thread
// blocked reading it, so the timer is fired at once, and its thread, seeing
// done, closes it and ends.
func (t *ThreadTimer) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	t.done = true
	t.set(1)
}
