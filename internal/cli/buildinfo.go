package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// version is stamped by scripts/release:
// -ldflags "-X github.com/etcdlead/etcdlead/internal/cli.version=v1.2.3".
// Unstamped, a module build (go install …@v1.2.3) shows its module version.
var version = ""

// commit is stamped by scripts/release, which builds with -buildvcs=false
// so that one commit gives one binary from a clone and from a git worktree
// alike (the go command records VCS data only in the former).
var commit = ""

func init() {
	// urfave/cli prints --version through this package-level hook; set once
	// here rather than in newApp, which tests call concurrently.
	cli.VersionPrinter = func(c *cli.Context) { writeVersion(c.App.Writer) }
}

func appVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// writeVersion prints what a bug report needs: the version, the commit
// where the build recorded one, and the Go toolchain and platform.
func writeVersion(w io.Writer) {
	fmt.Fprintf(w, "etcdlead version %s\n", appVersion())
	if c := buildCommit(); c != "" {
		fmt.Fprintf(w, "commit %s\n", c)
	}
	fmt.Fprintf(w, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// buildCommit is the VCS revision the go command recorded, marked when the
// tree had uncommitted changes, else the stamped one; "" when there is
// neither (-buildvcs=false, or a build from a module zip, which holds no
// VCS data).
func buildCommit() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return commit
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return commit
	}
	if modified == "true" {
		rev += " (modified)"
	}
	return rev
}
