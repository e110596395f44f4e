package supervisor

import "github.com/etcdlead/etcdlead/supervisor/internal/keeper"

// Supported reports whether this platform keeps the promise: Linux does.
func Supported() error { return nil }

// RunKeeper is the keeper process (supervisor/internal/keeper); its return
// value is the process's exit code.
func RunKeeper(args []string) int { return keeper.Run(args) }
