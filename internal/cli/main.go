package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/etcdlead/etcdlead/internal/logbuf"
)

// Main runs the command line args (args[0] is the program) and returns the
// process's exit code, after printing at most one line for the outcome.
// The caller exits with it once, so every deferred revoke and cleanup has
// run before the process ends.
func Main(args []string) int {
	err := newApp(args).RunContext(context.Background(), args)
	if msg := errorMessage(err); msg != "" {
		fmt.Fprintln(logbuf.Stderr(), "etcdlead: "+msg)
	}
	// Bounded: a stderr that never drains must not keep etcdlead from
	// exiting; the lease was revoked already.
	const exitFlush = 2 * time.Second
	logbuf.Flush(exitFlush)
	return exitCode(err)
}
