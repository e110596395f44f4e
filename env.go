package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/etcdlead/etcdlead/campaign"
)

// childEnv is the supervisor's environment without secrets and without the
// variables that would make a nested etcdlead join this election, plus what
// the child needs to know about its term (README.md, "The child").
func childEnv(environ []string, rc runConfig, t *campaign.Term) []string {
	return append(baseEnv(environ), termEnv(rc, t)...)
}

// baseEnv is the inherited part of the child's environment: known before
// the term is won, so a standby keeper can carry it.
func baseEnv(environ []string) []string {
	out := make([]string, 0, len(environ)+6)
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasSuffix(name, "_PASSWORD"),
			(name == envEtcdctlUser || name == envUser) && strings.Contains(val, ":"),
			name == envElection, name == envPrefix,
			name == envName, name == envKeyTo, name == envRev, name == envLease, name == envID, name == envEndpoints:
			continue
		}
		out = append(out, kv)
	}
	return out
}

// termEnv is what the child learns about its term.
func termEnv(rc runConfig, t *campaign.Term) []string {
	return []string{
		envName + "=" + rc.election,
		envKeyTo + "=" + t.Key,
		envRev + "=" + strconv.FormatInt(t.Rev, 10),
		envLease + "=" + fmt.Sprintf("%x", int64(t.Lease)),
		envID + "=" + rc.id,
		envEndpoints + "=" + strings.Join(rc.conn.endpoints, ","),
	}
}
