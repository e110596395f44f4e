package runner

import (
	"fmt"
	"strconv"
	"strings"
)

// The variables that tell the child about its term (README.md, "The
// child"). Some share a name with the flag variable that sets the same
// value (ETCDLEAD_ID, ETCDLEAD_ENDPOINTS), on purpose.
const (
	EnvName      = "ETCDLEAD_NAME"
	EnvKey       = "ETCDLEAD_KEY"
	EnvRev       = "ETCDLEAD_REV"
	EnvLease     = "ETCDLEAD_LEASE"
	EnvID        = "ETCDLEAD_ID"
	EnvEndpoints = "ETCDLEAD_ENDPOINTS"
	// EnvSlot and EnvSlotRev are the term's slot and that slot's fencing
	// token (docs/design.md, "More than one holder"); with one holder, 0
	// and the same as EnvRev.
	EnvSlot    = "ETCDLEAD_SLOT"
	EnvSlotRev = "ETCDLEAD_SLOT_REV"
	// EnvRunID is the firing's run id (--run-id), set only with one.
	EnvRunID = "ETCDLEAD_RUN_ID"
)

// ChildVars are the variables termEnv sets; the inherited environment
// must not hold them already.
var ChildVars = []string{EnvName, EnvKey, EnvRev, EnvLease, EnvID, EnvEndpoints, EnvSlot, EnvSlotRev, EnvRunID}

// termEnv is what the child learns about its term.
func (r *Runner) termEnv(t Leadership) []string {
	id := t.ID()
	env := []string{
		EnvName + "=" + r.cfg.Campaign.Layout.Name(),
		EnvKey + "=" + id.Key,
		EnvRev + "=" + strconv.FormatInt(id.Rev, 10),
		EnvLease + "=" + fmt.Sprintf("%x", id.Lease),
		EnvID + "=" + r.cfg.Campaign.ID,
		EnvEndpoints + "=" + strings.Join(r.cfg.Endpoints, ","),
		EnvSlot + "=" + strconv.Itoa(id.Slot),
		EnvSlotRev + "=" + strconv.FormatInt(id.SlotRev, 10),
	}
	if r.cfg.Campaign.RunID != "" {
		env = append(env, EnvRunID+"="+r.cfg.Campaign.RunID)
	}
	return env
}
