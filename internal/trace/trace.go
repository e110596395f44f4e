//go:build etcdlead_trace

package trace

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Var is the environment variable that names the trace file.
const Var = "ETCDLEAD_TRACE"

// fd is the trace file, or -1 when tracing is off. It is set only while
// the package is initialised, before any goroutine can read it.
var (
	fd   = -1
	path string
	pid  []byte
)

func init() {
	path = os.Getenv(Var)
	// Removed even when empty, so that no process etcdlead starts
	// inherits it by accident.
	os.Unsetenv(Var)
	if path == "" {
		return
	}
	f, err := unix.Open(path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		// A development aid must not stop a run; the missing lines say
		// enough.
		path = ""
		return
	}
	fd = f
	pid = strconv.AppendInt(nil, int64(os.Getpid()), 10)
}

// Enabled reports whether marks are written.
func Enabled() bool { return fd >= 0 }

// Environ returns env with the trace variable added when tracing is on, for
// a process of etcdlead's own that should trace too (a keeper). env itself
// is never written to; nil stands for this process's environment, as in
// os/exec.
func Environ(env []string) []string {
	if fd < 0 {
		return env
	}
	if env == nil {
		env = os.Environ()
	}
	return append(env[:len(env):len(env)], Var+"="+path)
}

// Mark records event now.
func Mark(event string) {
	if fd >= 0 {
		write(event, "", 0, false)
	}
}

// MarkInt records event now with one integer attribute.
func MarkInt(event, key string, v int64) {
	if fd >= 0 {
		write(event, key, v, true)
	}
}

// write builds the whole line first: one write(2) per mark is what keeps
// lines of concurrent processes whole in an O_APPEND file.
func write(event, key string, v int64, withKV bool) {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	var buf [160]byte
	b := strconv.AppendInt(buf[:0], ts.Nano(), 10)
	b = append(b, ' ')
	b = append(b, pid...)
	b = append(b, ' ')
	b = append(b, event...)
	if withKV {
		b = append(b, ' ')
		b = append(b, key...)
		b = append(b, '=')
		b = strconv.AppendInt(b, v, 10)
	}
	b = append(b, '\n')
	for {
		_, err := unix.Write(fd, b)
		if err != unix.EINTR {
			return
		}
	}
}
