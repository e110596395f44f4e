//go:build !etcdlead_trace

package trace

import "github.com/hashicorp/go-hclog"

// Var is the environment variable that names the trace file in a traced
// build; an untraced one ignores it.
const Var = "ETCDLEAD_TRACE"

// Hook returns l: this build stamps nothing.
func Hook(l hclog.Logger) hclog.Logger { return l }
