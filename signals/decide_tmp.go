package signals

import "os"

// TEMPORARY: replaced by the decision table on the supervisor-signals branch.

type Phase int

const (
	Campaigning Phase = iota
	BackingOff
	Leading
	Stopping
	Holding
)

func (p Phase) String() string {
	return [...]string{"campaigning", "backing off", "leading", "stopping", "holding"}[p]
}

type DAction int

const (
	Exit DAction = iota
	StopChild
	KillChild
	Forward_
	IgnoreNoChild
	IgnoreStopped
)

func Decide(p Phase, sig os.Signal) DAction {
	c := Classify(sig)
	switch {
	case c == Ignore:
		return IgnoreStopped
	case c == Stop && p == Leading:
		return StopChild
	case c == Stop && p == Stopping:
		return KillChild
	case c == Stop:
		return Exit
	case p == Leading || p == Stopping:
		return Forward_
	}
	return IgnoreNoChild
}
