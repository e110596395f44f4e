// Package health runs the checks that decide whether a candidate may lead:
// the leader's health check (--health-cmd, --health-url) and every
// candidate's eligibility check (--eligible-cmd), with Docker
// HEALTHCHECK's meanings (docs/checks.md, "Health checks").
//
// A check command runs under a keeper of its own (package supervisor), as
// the child does: in a cgroup of its own where the run has them, fenced at
// the term's deadline, killed with every descendant at its timeout, and
// stopped when the supervisor dies. So a check that hangs, forks or floods
// its output costs at most its timeout, and when Check returns no process
// of it is left. What the check writes is drained as it comes, and only
// its first MaxOutput bytes are kept.
//
// Tracker holds Docker's rules for turning answers into a status: failures
// in the start period do not count until a check passes, and Retries
// failures in a row make the status unhealthy.
//
// It runs in the supervisor process (the etcdlead that campaigns); each
// check command's keeper is a process of its own.
package health
