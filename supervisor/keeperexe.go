package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// KeeperName is the keeper's own executable, built from cmd/etcdlead-keeper:
// the supervisor package and what it needs, without etcd's client, gRPC or
// the command line, so that it starts quickly and holds little memory.
const KeeperName = "etcdlead-keeper"

// KeeperArg is argv[1] of the hidden keeper mode of the etcdlead binary: the
// keeper when no keeper binary can be used. Its main hands the rest of the
// arguments to RunKeeper.
const KeeperArg = "__etcdlead_keeper"

// KeeperDir, when set at build time (for packages: -ldflags
// "-X github.com/etcdlead/etcdlead/supervisor.KeeperDir=/usr/libexec/etcdlead"),
// is the one directory where KeeperName is looked for; otherwise it is looked
// for beside this executable, symlinks resolved. Never on PATH: the keeper
// enforces the fence, so it must come from where etcdlead was installed,
// not from whatever a user's PATH names first.
var KeeperDir = ""

// selfExe is the fallback keeper: this very binary, which needs nothing
// installed beside it and always speaks its protocol (the file of the
// running process, even after an upgrade replaced it on disk). A variable
// only so that a benchmark can put the etcdlead binary in its place.
var selfExe = "/proc/self/exe"

// keeperExe is how this process starts its keepers. It is decided at the
// first launch, so a standby keeper and a fresh one run the same program,
// and changes at most once: to the fallback, when the keeper binary cannot be
// started or speaks another protocol (after an upgrade replaced it, say).
// The fallback is logged once per process, at info level, with where the
// keeper binary was looked for: it costs time to the first child and memory,
// nothing of the promise, so it is no warning (a cron job run at
// --log-level=warn stays silent), but an operator reading the start-up log
// should learn which program enforces the fence, and where to install the
// keeper binary to get the faster one.
var keeperExe struct {
	sync.Mutex
	decided bool
	path    string // KeeperName's path, or "" for the fallback
	looked  string // where KeeperName was looked for, for the log line
	why     string // why the fallback, until it is logged
}

// keeperPath returns the keeper binary's path, or "" for the fallback.
func keeperPath(log hclog.Logger) string {
	keeperExe.Lock()
	if !keeperExe.decided {
		keeperExe.decided = true
		keeperExe.looked, keeperExe.why = findKeeper()
		if keeperExe.why == "" {
			keeperExe.path = keeperExe.looked
		}
	}
	path, looked, why := keeperExe.path, keeperExe.looked, keeperExe.why
	keeperExe.why = ""
	keeperExe.Unlock()
	if why != "" {
		logFallback(log, looked, why)
	}
	return path
}

// notKeeper makes the fallback this process's keeper from now on, after the
// keeper binary at path failed it.
func notKeeper(path, why string, log hclog.Logger) {
	keeperExe.Lock()
	switched := path != "" && keeperExe.path == path
	if switched {
		keeperExe.path = ""
	}
	keeperExe.Unlock()
	if switched {
		logFallback(log, path, why)
	}
}

func logFallback(log hclog.Logger, looked, why string) {
	if looked == "" {
		looked = "beside this executable"
	}
	log.Info("the keeper is a re-exec of this binary: no usable "+KeeperName+" (as safe; slower to start a child)",
		"looked_for", looked, "reason", why)
}

// findKeeper looks once, in KeeperDir or beside this executable. path is
// where it looked, when known; why, when not "", says why that is no
// keeper.
func findKeeper() (path, why string) {
	dir := KeeperDir
	if dir == "" {
		exe, err := os.Executable()
		if err == nil {
			exe, err = filepath.EvalSymlinks(exe)
		}
		if err != nil {
			return "", fmt.Sprintf("cannot locate this executable: %v", err)
		}
		dir = filepath.Dir(exe)
	}
	path = filepath.Join(dir, KeeperName)
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return path, err.Error()
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return path, path + " is not an executable file"
	}
	return path, ""
}
