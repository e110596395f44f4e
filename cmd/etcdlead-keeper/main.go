// Command etcdlead-keeper is the keeper that etcdlead starts for each child:
// it owns the child's process tree and enforces the fence (docs/design.md,
// "The keeper"). It is package supervisor and what that needs alone, so
// that it starts faster and holds less memory than etcdlead itself, whose
// package initialisation includes etcd's client, gRPC and the command line.
//
// etcdlead looks for it beside its own executable, symlinks resolved, or in
// the directory fixed when etcdlead was built (supervisor.KeeperDir), never
// on PATH. The two check a protocol version before any child starts; when
// no keeper of etcdlead's protocol is found, etcdlead re-executes itself as
// the keeper instead. Nobody else runs it.
package main

import (
	"os"

	"github.com/etcdlead/etcdlead/supervisor"
)

func main() {
	os.Exit(supervisor.RunKeeper(os.Args[1:]))
}
