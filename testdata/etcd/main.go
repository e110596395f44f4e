// Command etcd is the etcd server at the version pinned in go.mod. The tests
// build it (without the race detector) and run it as a process of its own, so
// that what they exercise is a real etcd, not a stand-in. It lives under
// testdata/ so that ./... patterns never compile it with the race detector.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
