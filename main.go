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

	"github.com/etcdlead/etcdlead/internal/cli"
	"github.com/etcdlead/etcdlead/supervisor"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == supervisor.KeeperArg {
		os.Exit(supervisor.RunKeeper(os.Args[2:]))
	}
	os.Exit(cli.Main(os.Args))
}
