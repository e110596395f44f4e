package logbuf

import (
	"bytes"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/internal/trace"
)

var stderr = sync.OnceValue(func() *Writer { return New(os.Stderr, 0) })

// Stderr is the process's one Writer on os.Stderr. Everything the process
// logs goes through it, so one Flush at exit covers it all.
func Stderr() *Writer { return stderr() }

// Logger is an hclog.Logger with opts whose output is Stderr; the notice of
// dropped lines takes the logger's format and name. Each record is one
// line, and durations read as "15s" in both formats (see records). An
// opts.Output that is set must be a filter that writes on to Stderr, and
// must not block.
func Logger(opts hclog.LoggerOptions) hclog.Logger { return logger(Stderr(), opts) }

func logger(w *Writer, opts hclog.LoggerOptions) hclog.Logger {
	notice := opts
	notice.Mutex = nil // its own: it runs on the writer's goroutine
	w.SetNotice(func(n int) []byte {
		var b bytes.Buffer
		notice.Output = &b
		notice.Level = hclog.Warn
		hclog.New(&notice).Warn("log lines dropped: stderr was blocked", "dropped", n)
		return b.Bytes()
	})
	if opts.Output == nil {
		opts.Output = w
	}
	return trace.Hook(records{hclog.New(&opts), opts.JSONFormat})
}

// Flush flushes Stderr for at most timeout: see Writer.Flush.
func Flush(timeout time.Duration) bool { return Stderr().Flush(timeout) }
