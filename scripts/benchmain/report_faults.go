package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/etcdlead/etcdlead/campaign"
)

// sectionMemberFailovers writes the failovers per rounds with a frozen
// member or a slow link (faults.go).
func (r *report) sectionMemberFailovers(w func(string, ...any)) {
	if len(r.memberFailovers) == 0 {
		if len(r.crash) > 0 { // -only crash
			w("## %d. Crash failovers on three members\n\n", r.section("failovers"))
			r.crashSection(w)
		}
		return
	}
	f0 := r.memberFailovers[0]
	w("## %d. Failovers with a frozen member or a slow link\n\n", r.section("failovers"))
	w("A three-member etcd on loopback, each member's data on disk; every candidate has a client of its own with all three members' endpoints, each through a TCP proxy (`internal/testsupport/faultproxy`). ")
	w("In each round, a fresh election per tool, a leader and one waiting candidate each, both tools at once, at TTL %s; then the fault for %s (3×TTL), then %s to settle. ", f0.TTL, f0.Duration, f0.TTL)
	w("A frozen member is a SIGSTOP of its process (its connections stay open and silent) and a SIGCONT at the end; a slow link delays every byte by half the round trip each way, on every member's proxy. ")
	w("The candidates run in the bench's process: etcdlead's `campaign` package, its leader counting as having lost its term when its fence point passes (where the keeper would stop the child), when it stops leading, or when its waiter wins; ")
	w("etcdctl lock's recipe (`concurrency.Session` and `Mutex`), its leader counting as lost when its session ends (etcdctl lock then ends its command) or its waiter locks. A round counts once per tool whose leader lost.\n\n")
	w("| fault, at TTL %s | rounds | etcdlead: failovers | etcdctl lock: failovers | how the leaders lost |\n|---|---|---|---|---|\n", f0.TTL)
	for _, row := range r.memberFailovers {
		var how []string
		for _, k := range []string{lead, ctl} {
			if len(row.Why[k]) > 0 {
				how = append(how, k+": "+strings.Join(slices.Compact(slices.Sorted(slices.Values(row.Why[k]))), ", "))
			}
		}
		w("| %s for %s | %d | %d | %d | %s |\n", row.Fault, row.Duration, row.Rounds, row.Failovers[lead], row.Failovers[ctl], strings.Join(how, "; "))
	}
	w("\n")
	for _, row := range r.memberFailovers {
		if row.Fault == "a follower member frozen (SIGSTOP)" {
			r.addTarget("a frozen follower costs no leader its term (TTL 2 s)", strconv.Itoa(row.Failovers[lead])+" failovers in "+strconv.Itoa(row.Rounds)+" rounds", row.Failovers[lead] == 0, "see the section on failovers with a frozen member")
		}
	}
	r.crashSection(w)
}

// crashSection writes the crash failovers with and without a raft leader
// change (faults.go), inside the member failovers' section.
func (r *report) crashSection(w func(string, ...any)) {
	if len(r.crash) == 0 {
		return
	}
	ttl := r.crash[0].TTL
	tm, err := timingFor(ttl)
	if err != nil {
		return
	}
	bound := campaign.EndedWaitLimit(ttl, tm.FenceMargin).Round(time.Millisecond)
	w("**A crash after a raft leader change.** On the same three-member etcd, an etcdlead leader in the bench's process and one waiter, at TTL %s; in every other round the raft leadership is moved (`etcdctl move-leader`) after the leader's grant; then, at a random moment 1–1.5 s later, the leader's renewals stop, as a `kill -9` stops them, and nothing deletes its keys or record. ", ttl)
	w("The time runs from the end of its last renewal to the waiter's election. After a raft leader change the waiter cannot tell the lease's expiry from a resumed raft leader's sweep, so it holds the leader's record a TTL and mu (a bound on etcd's election timeout, read off the least TTL etcd grants, and the fence margin) after etcd said the lease is gone (docs/design.md, *The term record*): %s more than without the move, %s from the last renewal (`campaign.EndedWaitLimit`) where etcd ends the lease at once, and etcd looks for expired leases every 500 ms. The target is the one without the move, TTL + 0.3 s, plus the hold.\n\n", bound-ttl, bound)
	w("| raft leader moved since the grant | rounds | crash → next leader: median | max | the waiter held the record |\n|---|---|---|---|---|\n")
	for _, row := range r.crash {
		moved := "no"
		if row.Moved {
			moved = "yes"
		}
		w("| %s | %d | %s | %s | %d of %d |\n", moved, len(row.Took), ms(row.Took.median()), ms(row.Took.max()), row.Held, len(row.Took))
	}
	w("\n")
	for _, row := range r.crash {
		if row.Moved {
			r.addTarget(fmt.Sprintf("crash failover after a raft leader change: median ≤ 2×TTL + mu + 0.3 s (%s at TTL %s), the record held", bound+300*time.Millisecond, ttl),
				fmt.Sprintf("median %s, max %s; held in %d of %d", ms(row.Took.median()), ms(row.Took.max()), row.Held, len(row.Took)),
				row.Took.median() <= bound+300*time.Millisecond && row.Held == len(row.Took), "see the crash failovers after a raft leader change")
		} else {
			r.addTarget(fmt.Sprintf("crash failover with no raft leader change ≤ TTL + 0.3 s on three members (TTL %s), no hold", ttl),
				fmt.Sprintf("median %s; held in %d of %d", ms(row.Took.median()), row.Held, len(row.Took)),
				row.Took.median() <= ttl+300*time.Millisecond && row.Held == 0, "see the crash failovers after a raft leader change")
		}
	}
}

// sectionTolerance writes the outage tolerance table (faults.go).
func (r *report) sectionTolerance(w func(string, ...any)) {
	if len(r.tolerance) == 0 {
		return
	}
	w("## %d. Outage tolerance\n\n", r.section("tolerance"))
	w("How long a fault may last before an etcdlead leader fences itself, measured on a three-member etcd as for the failovers above (the leader in the bench's process, its client through one proxy per member), beside the computed tolerance T − K − m − r (`campaign.Timing.OutageTolerance`) at etcdlead's default kill timeout K and fence margin m (and renewal interval r, but where a longer one is given); it is the worst case, a fault that begins just as a renewal is due, r after the last one answered, and one that begins just after an answer leaves up to r more. It bounds a round trip too: an answer moves the deadline to its own send time + T, so once a link turns slow the next answer, sent up to r after the last one that came back in time, must come back within T − K − m of that one's send. ")
	w("An outage (every member frozen) and no raft leader (the raft leader and a follower frozen, so that the third member has no quorum) are held until the leader's fence point passes: the time from the fault's start to that point is the longest such fault it rides out, in one try. ")
	w("A stalled follower and a stalled raft leader are each held for 2×TTL: a leader that rides that out rides out any length, as long as a quorum is healthy. ")
	w("The round trip is searched by bisection between 0 and T, each try holding a fresh leader behind the delay for 1.5×TTL; the longest that held is shown, with the tries.\n\n")
	w("| TTL | fault | computed | measured | tries |\n|---|---|---|---|---|\n")
	for _, row := range r.tolerance {
		var m string
		switch {
		case row.Fenced:
			m = "fenced " + row.Measured.Round(10*time.Millisecond).String() + " after the fault began"
		case row.Tries != "":
			m = "held up to " + row.Measured.String()
		default:
			m = "held through " + row.Measured.String() + " (no fence)"
		}
		ttl := row.TTL.String()
		if row.Renew > 0 && row.Renew != campaign.DefaultRenewInterval(row.TTL) {
			ttl += fmt.Sprintf(", `--renew-interval %v`", row.Renew)
		}
		w("| %s | %s | %s | %s | %s |\n", ttl, row.Fault, row.Computed, m, row.Tries)
	}
	w("\n")
}
