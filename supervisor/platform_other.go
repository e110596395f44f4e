//go:build !linux

package supervisor

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/supervisor/internal/proctree"
)

// ErrUnsupported: the promise rests on Linux features (a child subreaper,
// parent-death signals, CLOCK_BOOTTIME), so elsewhere etcdlead does not run.
var ErrUnsupported = errors.New("etcdlead keeps its promise only on Linux; this platform is not supported")

// RunKeeper refuses: see ErrUnsupported.
func RunKeeper([]string) int {
	fmt.Fprintln(os.Stderr, "etcdlead:", ErrUnsupported)
	return exitcode.Failure
}

// Supported reports whether this platform keeps the promise: it does not.
func Supported() error { return ErrUnsupported }

func becomeSubreaper() {}

var subreaperErr error

type orphans struct{}

func killOrphans(int) *orphans { return &orphans{} }

func (*orphans) wait(time.Duration) int { return 0 }

const orphanWait = 0

// Containment modes; elsewhere than Linux nothing runs (ErrUnsupported).
const (
	ContainAuto         = "auto"
	ContainCgroup       = "cgroup"
	ContainProcessGroup = "process-group"
)

type Containment struct{ Mode, Dir, Why string }

var ErrNoCgroup = errors.New("no cgroup containment")

func Contain(string, hclog.Logger) (Containment, error) { return Containment{}, ErrUnsupported }

func ReleaseContainment() {}

func CgroupSupport() error { return ErrUnsupported }

type termCgroups struct{ dir, keeper, child proctree.Cgroup }

func newTermCgroups(hclog.Logger) termCgroups { return termCgroups{} }
func (termCgroups) remove(hclog.Logger)       {}

func intoCgroup(*syscall.SysProcAttr, int) {}

func (*Child) superviseFence()         {}
func (*Child) moveFence(time.Duration) {}
func (*Child) supervisorFenced() bool  { return false }

// ReapAdopted does nothing here.
func ReapAdopted() (stop func()) { return func() {} }
