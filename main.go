// Command etcdlead runs a command only while it holds leadership of an
// election in etcd. See README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/etcdlead/etcdlead/internal/logbuf"
	"github.com/etcdlead/etcdlead/supervisor"
)

func main() {
	os.Exit(realMain(os.Args))
}

// realMain is the whole program; main only exits with its code, so every
// deferred revoke and cleanup has run before the process ends.
func realMain(args []string) int {
	if len(args) > 1 && args[1] == supervisor.KeeperArg {
		return supervisor.RunKeeper(args[2:])
	}
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
