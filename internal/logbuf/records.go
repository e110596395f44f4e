package logbuf

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/internal/oneline"
)

// records is an hclog.Logger whose every record is one line that reads the
// same in both formats: a duration as "15s" (hclog's JSON would print its
// nanoseconds), and in text a value with a newline escaped, where hclog
// would continue the record on lines of their own, and a message that is
// not one clean line quoted, where hclog would print it raw. hclog escapes
// the other non-printing characters of a text value itself.
type records struct {
	hclog.Logger
	json bool
}

func (l records) Log(level hclog.Level, msg string, args ...any) {
	l.Logger.Log(level, l.msg(msg), l.args(args)...)
}

// Each level is checked before the arguments are touched: a trace line is
// logged at every renewal, and mostly not enabled.
func (l records) Trace(msg string, args ...any) {
	if l.IsTrace() {
		l.Logger.Trace(l.msg(msg), l.args(args)...)
	}
}

func (l records) Debug(msg string, args ...any) {
	if l.IsDebug() {
		l.Logger.Debug(l.msg(msg), l.args(args)...)
	}
}

func (l records) Info(msg string, args ...any) {
	if l.IsInfo() {
		l.Logger.Info(l.msg(msg), l.args(args)...)
	}
}

func (l records) Warn(msg string, args ...any) {
	if l.IsWarn() {
		l.Logger.Warn(l.msg(msg), l.args(args)...)
	}
}

func (l records) Error(msg string, args ...any) {
	if l.IsError() {
		l.Logger.Error(l.msg(msg), l.args(args)...)
	}
}

func (l records) With(args ...any) hclog.Logger {
	return records{l.Logger.With(l.args(args)...), l.json}
}

func (l records) Named(name string) hclog.Logger { return records{l.Logger.Named(name), l.json} }

func (l records) ResetNamed(name string) hclog.Logger {
	return records{l.Logger.ResetNamed(name), l.json}
}

func (l records) msg(msg string) string {
	if l.json {
		return msg
	}
	return oneline.Quote(msg)
}

// args returns args with the values rewritten where needed; args itself is
// left as it was, as a caller may still hold it.
func (l records) args(args []any) []any {
	var out []any
	for i := 1; i < len(args); i += 2 {
		v, ok := l.value(args[i])
		if !ok {
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		out[i] = v
	}
	if out == nil {
		return args
	}
	return out
}

var newlines = strings.NewReplacer("\r\n", `\r\n`, "\n", `\n`)

func (l records) value(v any) (any, bool) {
	if d, ok := v.(time.Duration); ok {
		return d.String(), true
	}
	if l.json {
		return nil, false
	}
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case error:
		s = v.Error()
	case fmt.Stringer:
		s = v.String()
	default:
		return nil, false
	}
	if !strings.Contains(s, "\n") {
		return nil, false
	}
	return newlines.Replace(s), true
}
