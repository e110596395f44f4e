//go:build !etcdlead_trace

package trace

// Var is the environment variable that names the trace file in a traced
// build; an untraced one ignores it.
const Var = "ETCDLEAD_TRACE"

// Enabled reports whether marks are written: never in this build.
func Enabled() bool { return false }

// Environ returns env unchanged.
func Environ(env []string) []string { return env }

// Mark does nothing in this build.
func Mark(string) {}

// MarkInt does nothing in this build.
func MarkInt(string, string, int64) {}
