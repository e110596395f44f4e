// Command etcdlead runs a command only while it holds leadership of an
// election in etcd. See README.md, and docs/design.md for how.
//
// The same binary is also the keeper that supervisor starts for each child
// when no etcdlead-keeper of its protocol is installed beside it
// (supervisor.KeeperArg, cmd/etcdlead-keeper); everything else is the
// command line, in internal/cli.
package main

import (
	"os"
	"runtime"

	"github.com/etcdlead/etcdlead/internal/cli"
	"github.com/etcdlead/etcdlead/supervisor"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == supervisor.KeeperArg {
		os.Exit(supervisor.RunKeeper(os.Args[2:]))
	}
	// The supervisor waits on etcd, its keeper and signals, and never
	// computes for long: with one P the runtime has no idle processor to
	// wake and spin at each renewal or message, which is most of an idle
	// supervisor's CPU and, on a machine of few cores shared with the
	// child, time on the handoff path (BENCHMARKS.md, "Footprint").
	// Set here rather than through GOMAXPROCS in the environment, which the
	// child would inherit. `run` starts on two and settles on one
	// (internal/cli/run.go).
	runtime.GOMAXPROCS(1)
	os.Exit(cli.Main(os.Args))
}
