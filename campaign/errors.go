package campaign

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/etcdlead/etcdlead/internal/etcdwire"
)

// Reasons a term ends without a stop request.
var (
	ErrKeyDeleted = errors.New("key deleted")
	// ErrKeyReplaced is a term's key put again under another lease (or
	// none) by someone else: it no longer goes with the term's lease; or
	// its record rewritten with a value the term did not write.
	ErrKeyReplaced = errors.New("key replaced")
	ErrLeaseLost   = errors.New("lease lost")
	// ErrNotLeader is returned when the caller's context ended while another
	// candidate still led.
	ErrNotLeader = errors.New("another candidate leads")
	// ErrUnreachable is returned when the caller's context ended while the
	// last request to etcd had failed or gone unanswered.
	ErrUnreachable = errors.New("etcd unreachable")
	// ErrResigned is an operator's request to step down (etcdlead resign).
	ErrResigned = errors.New("resign requested")
)

// HoldersError is a candidate whose number of holders differs from that of
// a term already in the election: counting older terms by a rule the older
// ones do not follow would break the promise, so it refuses at once.
type HoldersError struct {
	Election string // the election prefix
	Want     int    // this candidate's
	Found    int    // the other term's; 0 if its sentinel names none etcdlead writes
	Sentinel string // the other term's sentinel
}

func (e *HoldersError) Error() string { return e.Format("the number of holders") }

// Format words the error with option for the number of holders, such as
// the flag that sets it.
func (e *HoldersError) Format(option string) string {
	found := strconv.Itoa(e.Found)
	if e.Found == 0 {
		found = "an unknown number"
	}
	return fmt.Sprintf("%s %d, but the terms already in election %s have %s (%s): "+
		"every candidate of an election needs the same %s; to change it, stop every candidate first",
		option, e.Want, e.Election, found, e.Sentinel, option)
}

// Permanent reports errors that a retry cannot mend: credentials,
// permissions (etcdwire.Refused) and a number of holders the election does
// not agree on. A daemon retries everything else for ever.
func Permanent(err error) bool {
	if he := (*HoldersError)(nil); errors.As(err, &he) {
		return true
	}
	return etcdwire.Refused(err)
}
