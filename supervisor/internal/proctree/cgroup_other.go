//go:build !linux

package proctree

import "time"

// Cgroup is never set where there are no cgroups: the supervisor's code
// that reads one compiles, and runs nowhere (supervisor.ErrUnsupported).
type Cgroup string

func (Cgroup) Populated() (bool, error)              { return false, nil }
func (Cgroup) Empty() bool                           { return true }
func (Cgroup) Kill() error                           { return nil }
func (Cgroup) Await(time.Duration, func() bool) bool { return true }
