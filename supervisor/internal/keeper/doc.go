// Package keeper is the keeper process: the small process that starts the
// child, owns its cgroup, process group and whole tree, enforces the fence
// on the boot clock, and reports the child's end over a pipe once nothing
// of its tree is left (docs/design.md, "The keeper"). It runs only in the
// keeper process (cmd/etcdlead-keeper, or etcdlead in its keeper mode),
// entered through supervisor.RunKeeper; the supervisor's side of the pipe
// is package supervisor, and both speak protocol.go.
package keeper
