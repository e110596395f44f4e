//go:build etcdlead_trace

package trace

import (
	"os"
	"strconv"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// Var is the environment variable that names the trace file.
const Var = "ETCDLEAD_TRACE"

// fd is the trace file, or -1 when tracing is off. It is set only while
// the package is initialised, before any goroutine can read it.
var (
	fd  = -1
	pid []byte
)

func init() {
	path := os.Getenv(Var)
	if path == "" {
		return
	}
	f, err := unix.Open(path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		// A development aid must not stop a run; the missing lines say
		// enough.
		return
	}
	fd = f
	pid = strconv.AppendInt(nil, int64(os.Getpid()), 10)
}

// Hook returns l, stamping every message logged through it or a logger
// derived from it, when the trace file is set.
func Hook(l hclog.Logger) hclog.Logger {
	if fd < 0 {
		return l
	}
	return hooked{l}
}

// hooked stamps each call before the logger filters it by level: the
// steps the bench follows are logged at trace level, which a run's own
// level hides.
type hooked struct{ hclog.Logger }

func (h hooked) Log(level hclog.Level, msg string, args ...any) {
	stamp(msg)
	h.Logger.Log(level, msg, args...)
}
func (h hooked) Trace(msg string, args ...any) { stamp(msg); h.Logger.Trace(msg, args...) }
func (h hooked) Debug(msg string, args ...any) { stamp(msg); h.Logger.Debug(msg, args...) }
func (h hooked) Info(msg string, args ...any)  { stamp(msg); h.Logger.Info(msg, args...) }
func (h hooked) Warn(msg string, args ...any)  { stamp(msg); h.Logger.Warn(msg, args...) }
func (h hooked) Error(msg string, args ...any) { stamp(msg); h.Logger.Error(msg, args...) }

func (h hooked) With(args ...any) hclog.Logger       { return hooked{h.Logger.With(args...)} }
func (h hooked) Named(name string) hclog.Logger      { return hooked{h.Logger.Named(name)} }
func (h hooked) ResetNamed(name string) hclog.Logger { return hooked{h.Logger.ResetNamed(name)} }

// stamp builds the whole line first: one write(2) per line is what keeps
// lines of concurrent processes whole in an O_APPEND file.
func stamp(msg string) {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	var buf [160]byte
	b := strconv.AppendInt(buf[:0], ts.Nano(), 10)
	b = append(b, ' ')
	b = append(b, pid...)
	b = append(b, ' ')
	b = append(b, msg...)
	b = append(b, '\n')
	for {
		_, err := unix.Write(fd, b)
		if err != unix.EINTR {
			return
		}
	}
}
