package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/etcdlead/etcdlead/campaign"
)

// stepTableMD writes one path's rows: each step's median and p90, counted
// from the row named in it, and the median time since the first row.
func stepTableMD(w func(string, ...any), tab *stepTable) {
	unit := tab.Unit
	if unit == "" {
		unit = "handoffs"
	}
	w("**%s**, %d %s:\n\n", tab.Title, len(tab.times), unit)
	w("| # | step | stamped in | step: median | step: p90 | since row 0: median | seen in |\n|---|---|---|---|---|---|---|\n")
	for i, row := range tab.rows {
		step, at := tab.stat(i)
		name := row.Name
		if row.OffPath {
			name = "*" + name + " (off the path)*"
		}
		if row.Unsplit != "" {
			name += "; not split: " + row.Unsplit
		}
		if i == 0 {
			w("| 0 | %s | %s | | | | %d of %d |\n", name, row.Who, len(at), len(tab.times))
			continue
		}
		from := row.From
		if from == nil {
			from = []int{tab.prev(i)}
		}
		var fs []string
		for _, f := range from {
			fs = append(fs, fmt.Sprint(f))
		}
		ref := ""
		if len(from) > 1 || from[0] != i-1 {
			ref = " (from " + strings.Join(fs, ", ") + ")"
		}
		if len(at) == 0 {
			w("| %d | %s | %s | not seen | | | 0 of %d |\n", i, name, row.Who, len(tab.times))
			continue
		}
		w("| %d | %s | %s | %s%s | %s | %s | %d of %d |\n", i, name, row.Who, ms(step.median()), ref, ms(step.quantile(0.9)), ms(at.median()), len(at), len(tab.times))
	}
	w("\n")
}

func (r *report) sectionSteps(w func(string, ...any)) {
	s := r.steps
	if s == nil || (s.tables[lead] == nil && s.tables[ctl] == nil) {
		return
	}
	w("## %d. Graceful handoff, step by step\n\n", r.section("steps"))
	gapFigure := "the graceful handoff figure"
	if n := r.sec["handoff"]; n > 0 {
		gapFigure = fmt.Sprintf("section %d", n)
	}
	w("A separate pass, so that no stamp's cost enters the gap of %s: %d candidates per election, lease TTL 10 s, each handoff as there (the leader's child exits on request). ", gapFigure, s.queue)
	w("**etcdlead**'s steps are its own log lines, most at trace level: in a build with the tag `etcdlead_trace` (`internal/trace`; the bench builds it from the checkout beside the etcdlead it times, and a released etcdlead has no trace code), when `ETCDLEAD_TRACE` names a file, the one hook on each process's logger stamps every line, shown or not, with a CLOCK_MONOTONIC reading, the clock the bench's child stamps. ")
	w("**etcdctl lock** cannot be asked, so what it does is read off the wire: each candidate talks to etcd through a proxy of its own that stamps every HTTP/2 frame as it passes (`scripts/benchmain/proxy.go`), with the same clock; a request is a new stream's HEADERS frame from etcdctl, its answer etcd's first frame on that stream, a watch event a DATA frame on the stream of the watch. ")
	w("`strace -f -ttt` would split etcdctl's process steps too, but stops the process at every traced system call and stamps the wall clock; the proxy leaves the process alone and adds one loopback hop each way to each of its requests. ")
	w("etcdlead's candidates go through proxies of their own in this pass too, so that the rows marked *(proxy)* are the same wire stamps for both tools, and the rows between a mark and the wire show the etcd client's own share. ")
	w("A step is counted from the row just above unless it names its own (*from 5, 6*: the later of those rows); rows off the path are answers nobody waits for before the next child starts. Medians of steps do not add up to the median gap.\n\n")
	for _, key := range []string{lead, ctl} {
		tab := s.tables[key]
		if tab == nil {
			continue
		}
		if key == lead && !s.marks {
			w("**etcdlead**: no marks were written (the traced build, built with -tags etcdlead_trace, wrote none).\n\n")
			continue
		}
		stepTableMD(w, tab)
	}
	if h := r.handoff; h != nil {
		w("The gap in this pass, for the cost of looking: etcdlead %s with its marks and through its proxies (the headline run: %s), etcdctl lock %s through its proxies (headline: %s).\n\n",
			msOr(s.tables[lead]), ms(h.gap[lead].median()), msOr(s.tables[ctl]), ms(h.gap[ctl].median()))
	}
	w("**What could not be split for etcdctl lock**, seen only from outside: ")
	w("(1) from its child's last instruction to its unlock on the wire: the child's end, etcdctl's `wait4` returning and `Mutex.Unlock` sending its DeleteRange are one step; ")
	w("(2) etcd's commit of the delete and its watch event to the next candidate are one step (for etcdlead too: its end's commit and the event, between rows); ")
	w("(3) from the last read's answer to the new child's first instruction: `Mutex.Lock` returning, fork and exec of the child and the child's runtime start are one step. ")
	w("For etcdlead the last step likewise holds the child's runtime start after its exec.\n\n")
}

// msOr is the median gap of a step table's pass, or n/a.
func msOr(tab *stepTable) string {
	if tab == nil || len(tab.gaps) == 0 {
		return "n/a"
	}
	return ms(tab.gaps.median())
}

func (r *report) sectionDeleted(w func(string, ...any)) {
	d := r.deleted
	if d == nil {
		return
	}
	w("## %d. The leader's key deleted\n\n", r.section("deleted"))
	w("The bench deletes the leader's queue key as a hand would (`etcdctl del` of the oldest key under the election's prefix), one candidate waiting, lease TTL 10 s, alternating; the time runs from the delete request to the next child's first instruction. ")
	w("etcdlead's leader watches its own keys: its guard ends the term, the child is stopped at once, and once the child is gone the term's end deletes its record and sentinel, which wakes the waiter. ")
	w("etcdctl lock does not watch its own key: its waiter takes the lock on the delete's watch event while the old child runs on (the bench then ends it).\n\n")
	w("The old child's end is when the bench saw its socket close (the child dies of the keeper's SIGTERM and stamps nothing).\n\n")
	w("| | handoffs | delete → next child: median | p90 | max | delete → old child gone: median | old child gone → next child: median | old child gone first |\n|---|---|---|---|---|---|---|---|\n")
	for _, t := range r.tools {
		g := d.gap[t.Key]
		gone, goneTo := "n/a", "n/a"
		if x := d.gone[t.Key]; len(x) > 0 {
			gone, goneTo = ms(x.median()), ms(d.goneTo[t.Key].median())
		}
		w("| %s | %d | %s | %s | %s | %s | %s | %d of %d |\n", t.Name, len(g), ms(g.median()), ms(g.quantile(0.9)), ms(g.max()), gone, goneTo, len(g)-d.overlap[t.Key], len(g))
	}
	w("\n")
	if h := r.handoff; h != nil && len(h.gap[lead]) > 0 && len(d.gap[lead]) > 0 {
		g, x := h.gap[lead].median(), d.gap[lead].median()
		q := float64(x) / float64(g)
		r.addTarget("gap after the leader's key is deleted ≤ 1.2× the graceful gap (aim: the same)", fmt.Sprintf("%s vs %s: %.2f×, the old child gone first in %d of %d", ms(x), ms(g), q, len(d.gap[lead])-d.overlap[lead], len(d.gap[lead])),
			q <= 1.2 && d.overlap[lead] == 0, fmt.Sprintf("%.2f× against 1.2×; old child not gone first in %d", q, d.overlap[lead]))
	}
	if s := r.steps; s != nil && (s.tables[lead+" deleted"] != nil || s.tables[ctl+" deleted"] != nil) {
		w("Step by step, in the traced pass (as for the graceful handoff; etcdctl lock's next candidate seen through its proxy):\n\n")
		for _, key := range []string{lead + " deleted", ctl + " deleted"} {
			if tab := s.tables[key]; tab != nil && (key != lead+" deleted" || s.marks) {
				stepTableMD(w, tab)
			}
		}
	}
}

func (r *report) sectionFleet(w func(string, ...any)) {
	if len(r.fleet) == 0 {
		return
	}
	ttl := campaign.DefaultTTL
	w("## %d. Many elections on one etcd\n\n", r.section("fleet"))
	w("N elections at once on the one etcd, each with a leader and one waiting candidate, all idle, at the default TTL (%s); ", ttl)
	w("etcd's CPU from its own `process_cpu_seconds_total`, requests counted from its gRPC metrics as for the cost per handoff, over a window of %s after %s to settle (past every waiter's first renewal, which opens its renewal stream). ", r.fleet[0].Window.Round(time.Second), fleetSettle)
	w("Every candidate runs in the bench's process with an etcd client of its own, as a fleet of processes has (%s clients), for both tools: etcdlead's `campaign` package (a leader holds its term as the supervisor does, renewing and guarding its keys, but runs **no keeper and no child**), and etcdctl lock's recipe, one `concurrency.Session` (TTL %d s) and `concurrency.Mutex` per candidate. ", r.fleetClientCounts(), int(ttl/time.Second))
	w("A thousand etcdlead processes with their keepers would not fit this machine; what etcd sees of a candidate is the same. The candidates' own CPU is this one process's, on the same cores as etcd; where etcd and the candidates together need more than the machine's cores, both figures are capped by it.\n\n")
	var idle *fleetRun
	for _, f := range r.fleet {
		if f.Elections == 0 {
			idle = f
		}
	}
	if idle != nil {
		w("etcd alone, with no election, used %.2f CPU seconds per minute over the same window; the column *above idle* takes that off, per election.\n\n", idle.etcdCPUPerMinute())
	}
	w("| elections | tool | etcd CPU s per minute | above idle, per election: ms per minute | requests/s per election | of which renewals (LeaseKeepAlive) | LeaseKeepAlive streams opened/s per election | Watch messages (progress requests, watches created)/s per election | Watch streams opened/s per election | Txn/s per election | etcd CPU per request above idle | candidates' CPU s per minute (one process) |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range r.fleet {
		if f.Elections == 0 {
			continue
		}
		name := map[string]string{lead: "etcdlead (campaign)", ctl: "etcdctl lock's recipe"}[f.Tool]
		if f.Renew > 0 {
			name = fmt.Sprintf("etcdlead (campaign), --renew-interval %v", f.Renew)
		}
		if f.Err != "" {
			w("| %d | %s | failed: %s | | | | | | | | | |\n", f.Elections, name, f.Err)
			continue
		}
		perReq := "n/a"
		if f.Counts["requests"] > 0 {
			perReq = fmt.Sprintf("%.0f µs", f.aboveIdle(idle)/f.Counts["requests"]*f.Window.Minutes()*1e6)
		}
		w("| %d | %s | %.2f | %.1f | %.2f | %.2f | %.3f | %.2f | %.3f | %.2f | %s | %.2f |\n", f.Elections, name, f.etcdCPUPerMinute(), f.aboveIdle(idle)/float64(f.Elections)*1e3,
			f.perElectionPerSecond("requests"), f.perElectionPerSecond("req LeaseKeepAlive"), f.perElectionPerSecond("streams LeaseKeepAlive"),
			f.perElectionPerSecond("req Watch"), f.perElectionPerSecond("streams Watch"),
			f.perElectionPerSecond("req Txn"), perReq, f.SelfCPU.Seconds()/f.Window.Minutes())
	}
	w("\n")
	// Side by side per size.
	bySize := map[int][2]*fleetRun{}
	longer := map[int]*fleetRun{} // etcdlead with a longer --renew-interval, by size
	var sizes []int
	for _, f := range r.fleet {
		if f.Elections == 0 {
			continue
		}
		if f.Renew > 0 {
			if f.Err == "" {
				longer[f.Elections] = f
			}
			continue
		}
		if f.Err != "" {
			if f.Tool == lead {
				for _, t := range []string{"etcd CPU ≤ 3×", "requests/s per election ≤ 3.5×", "candidates' CPU ≤ 3×"} {
					r.addTarget(fmt.Sprintf("idle elections (%d): %s etcdctl lock's", f.Elections, t), "not measured: "+f.Err, false, "etcdlead's fleet could not be held")
				}
			}
			continue
		}
		x, seen := bySize[f.Elections]
		if !seen {
			sizes = append(sizes, f.Elections)
		}
		if f.Tool == lead {
			x[0] = f
		} else {
			x[1] = f
		}
		bySize[f.Elections] = x
	}
	w("| elections | etcd CPU: etcdlead / etcdctl lock | above idle: etcdlead / etcdctl lock | requests: etcdlead / etcdctl lock | candidates' CPU: etcdlead / etcdctl lock |\n|---|---|---|---|---|\n")
	for _, n := range sizes {
		x := bySize[n]
		if x[0] == nil || x[1] == nil {
			continue
		}
		cpu, req, self := x[0].etcdCPUPerMinute()/x[1].etcdCPUPerMinute(), x[0].perElectionPerSecond("requests")/x[1].perElectionPerSecond("requests"), x[0].SelfCPU.Seconds()/x[1].SelfCPU.Seconds()
		w("| %d | %s | %s | %s | %s |\n", n, ratioF(x[0].etcdCPUPerMinute(), x[1].etcdCPUPerMinute()), ratioF(x[0].aboveIdle(idle), x[1].aboveIdle(idle)),
			ratioF(x[0].perElectionPerSecond("requests"), x[1].perElectionPerSecond("requests")), ratioF(x[0].SelfCPU.Seconds(), x[1].SelfCPU.Seconds()))
		perElection := func(f *fleetRun) string {
			return fmt.Sprintf("%.1f ms/min of etcd CPU per election above idle, against %.1f", f.aboveIdle(idle)/float64(n)*1e3, x[1].aboveIdle(idle)/float64(n)*1e3)
		}
		r.addTarget(fmt.Sprintf("idle elections (%d): etcd CPU ≤ 3× etcdctl lock's", n), fmt.Sprintf("%s (%s)", against(cpu, 3), perElection(x[0])), cpu <= 3, "see the section on many elections")
		r.addTarget(fmt.Sprintf("idle elections (%d): requests/s per election ≤ 3.5× etcdctl lock's", n), fmt.Sprintf("%s (%.2f against %.2f)", against(req, 3.5), x[0].perElectionPerSecond("requests"), x[1].perElectionPerSecond("requests")), req <= 3.5, "see the section on many elections")
		perSec := x[0].perElectionPerSecond("requests")
		r.addTarget(fmt.Sprintf("idle elections (%d): requests/s per election not above %.2f", n, idleRequestsTarget), fmt.Sprintf("%.2f", perSec),
			math.Round(perSec*100)/100 <= idleRequestsTarget, "see the section on many elections")
		r.addTarget(fmt.Sprintf("idle elections (%d): candidates' CPU ≤ 3× etcdctl lock's", n), fmt.Sprintf("%s (%.2f against %.2f CPU s per minute)", against(self, 3), x[0].SelfCPU.Seconds()/x[0].Window.Minutes(), x[1].SelfCPU.Seconds()/x[1].Window.Minutes()), self <= 3, "see the section on many elections")
	}
	w("\n")
	for _, n := range sizes {
		x, l := bySize[n], longer[n]
		if x[1] == nil || l == nil {
			continue
		}
		tm, err := campaign.ResolveTiming(campaign.Timing{TTL: ttl, RenewInterval: l.Renew})
		def, derr := timingFor(ttl)
		if err != nil || derr != nil {
			continue
		}
		w("**With `--renew-interval %v`** (%d elections), at an outage tolerance of %v instead of %v (section *Outage tolerance*): etcd CPU %s etcdctl lock's, above idle %s, requests %s (%.2f against %.2f per second per election), candidates' CPU %s.\n\n",
			l.Renew, n, tm.OutageTolerance(), def.OutageTolerance(),
			ratioF(l.etcdCPUPerMinute(), x[1].etcdCPUPerMinute()), ratioF(l.aboveIdle(idle), x[1].aboveIdle(idle)),
			ratioF(l.perElectionPerSecond("requests"), x[1].perElectionPerSecond("requests")), l.perElectionPerSecond("requests"), x[1].perElectionPerSecond("requests"),
			ratioF(l.SelfCPU.Seconds(), x[1].SelfCPU.Seconds()))
	}
	r.fleetProjection(w, bySize, sizes, idle)
	r.fleetCadence(w, bySize, sizes, idle)
}

// against writes a ratio judged against bound with two decimals, or as
// many more, up to six, as it takes not to round it onto the bound and
// hide which side it is on.
func against(ratio, bound float64) string {
	for prec := 2; ; prec++ {
		s := strconv.FormatFloat(ratio, 'f', prec, 64)
		if prec == 6 || ratio == bound || s != strconv.FormatFloat(bound, 'f', prec, 64) {
			return s + "×"
		}
	}
}

// projectedFleet is the size the fleet figure projects to when it was not
// measured: the larger fleet, whose 20,000 clients and candidates
// do not fit two cores beside etcd.
const projectedFleet = 10000

// fleetProjection says, from the largest fleet measured, what etcd and the
// candidates would need for projectedFleet elections, when that size was
// not measured, taking the cost per election to stay as measured.
func (r *report) fleetProjection(w func(string, ...any), bySize map[int][2]*fleetRun, sizes []int, idle *fleetRun) {
	largest := 0
	for _, n := range sizes {
		if x := bySize[n]; x[0] != nil && x[1] != nil {
			largest = max(largest, n)
		}
	}
	if largest == 0 || largest >= projectedFleet {
		return
	}
	x := bySize[largest]
	cores := func(perMinute float64, n int) float64 { return perMinute / 60 * float64(projectedFleet) / float64(n) }
	w("**%d elections, projected, not measured.** From the %d-election figures, per election, growing in step with the number of elections: etcd would spend %.2f cores above idle on etcdlead's fleet against %.2f on etcdctl lock's, and the candidates %.2f cores against %.2f, which a real fleet spreads over its machines. ",
		projectedFleet, largest, cores(x[0].aboveIdle(idle), largest), cores(x[1].aboveIdle(idle), largest),
		cores(x[0].SelfCPU.Seconds()/x[0].Window.Minutes(), largest), cores(x[1].SelfCPU.Seconds()/x[1].Window.Minutes(), largest))
	if smallest := slices.Min(sizes); smallest < largest {
		if s := bySize[smallest]; s[0] != nil && s[1] != nil {
			per := func(f *fleetRun, n int) float64 { return f.aboveIdle(idle) / float64(n) }
			w("Per election, etcd's CPU above idle at %d elections was %.2f× what it was at %d for etcdlead's fleet and %.2f× for etcdctl lock's: a projection in step with the number of elections assumes that it stays flat beyond. ",
				largest, per(x[0], largest)/per(s[0], smallest), smallest, per(x[1], largest)/per(s[1], smallest))
		}
	}
	w("Here they would share this machine's %d cores with etcd, with %d etcd clients in one process and as many connections open in etcd, against a limit of %s open files per process: `scripts/bench -only fleet -fleet %d` tries it.\n\n", r.mach.Cores, fleetClients(projectedFleet), fileLimit(), projectedFleet)
}

// fileLimit is this process's hard limit of open files, which etcd
// beside it inherits, as the report says it.
func fileLimit() string {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return "an unknown number of"
	}
	return strconv.FormatUint(lim.Max, 10)
}

// fleetClientCounts says how many clients each fleet size used.
func (r *report) fleetClientCounts() string {
	var parts []string
	seen := map[int]bool{}
	for _, f := range r.fleet {
		if f.Elections > 0 && !seen[f.Elections] {
			seen[f.Elections] = true
			parts = append(parts, fmt.Sprintf("%d (at %d elections)", fleetClients(f.Elections), f.Elections))
		}
	}
	return strings.Join(parts, ", ")
}

// aboveIdle is etcd's CPU seconds per minute less idle's, never below zero.
func (f *fleetRun) aboveIdle(idle *fleetRun) float64 {
	if idle == nil {
		return f.etcdCPUPerMinute()
	}
	return max(0, f.etcdCPUPerMinute()-idle.etcdCPUPerMinute())
}

// fleetCadence explains the renewal cadence's share from the largest fleet
// that both tools ran.
func (r *report) fleetCadence(w func(string, ...any), bySize map[int][2]*fleetRun, sizes []int, idle *fleetRun) {
	var a, c *fleetRun
	for _, n := range sizes {
		if x := bySize[n]; x[0] != nil && x[1] != nil {
			a, c = x[0], x[1]
		}
	}
	if a == nil {
		return
	}
	ttl := campaign.DefaultTTL
	lr := 1 / campaign.DefaultRenewInterval(ttl).Seconds() // leader renewals per second
	wr := 3 / ttl.Seconds()                                // a waiter's, and each of etcdctl lock's
	nomLead, nomCtl := lr+wr, 2*wr
	renA, renC := a.perElectionPerSecond("req LeaseKeepAlive"), c.perElectionPerSecond("req LeaseKeepAlive")
	reqA, reqC := a.perElectionPerSecond("requests"), c.perElectionPerSecond("requests")
	w("**The renewal cadence's share.** At TTL %s an etcdlead leader renews every min(TTL/10, 1 s) = %s and its waiter every TTL/3 = %s: %.2f renewals per second per election by the cadence; etcdctl lock's session renews every TTL/3 for both: %.2f. ",
		ttl, campaign.DefaultRenewInterval(ttl), ttl/3, nomLead, nomCtl)
	w("Measured at %d elections: %.2f and %.2f renewals, out of %.2f and %.2f requests per second per election. ", a.Elections, renA, renC, reqA, reqC)
	if reqA > 0 {
		w("Renewals are %.0f%% of etcdlead's requests; the rest are watch traffic, among it each term's progress requests, which tell a silently stalled watch stream (docs/design.md, step 3), and Txn (%.2f/s). ",
			100*renA/reqA, a.perElectionPerSecond("req Txn"))
		w("Renewing its leader every TTL/3 instead would take %.2f requests per second per election off etcdlead's (%.0f%% of them)", lr-wr, 100*(lr-wr)/reqA)
	}
	perReq := func(f *fleetRun) float64 { return f.aboveIdle(idle) * f.Window.Minutes() / f.Counts["requests"] }
	if reqA > 0 && reqC > 0 {
		w("; at etcdctl lock's %.0f µs of etcd CPU per request above idle (its requests are nearly all renewals), about %.2f of the %.2f CPU seconds per minute that etcdlead's fleet adds to etcd. ",
			perReq(c)*1e6, (lr-wr)*float64(a.Elections)*60*perReq(c), a.aboveIdle(idle))
		w("Per request, though, etcd spent %.0f µs on etcdlead's fleet against %.0f µs on etcdctl lock's", perReq(a)*1e6, perReq(c)*1e6)
		if st := a.perElectionPerSecond("streams LeaseKeepAlive"); renA > 0 && st > 0.5*renA {
			w(": each etcdlead renewal opens a LeaseKeepAlive stream of its own and ends it (%.2f streams opened per second per election), where a client's sessions keep one stream open for all their renewals", st)
		}
	}
	w(". The cadence is what the fence needs: the deadline counts from the last renewal's send time, so renewals set how long an etcd outage a leader survives (`docs/design.md`, step 8).\n\n")
}

// renewEvery is how often a process of the footprint figure renews: 0 for
// one that does not.
func renewEvery(tool, role string, ttl int) time.Duration {
	t := time.Duration(ttl) * time.Second
	switch {
	case tool == "etcdlead" && (role == "leader" || role == "keeper"):
		return campaign.DefaultRenewInterval(t)
	case role == "leader" || role == "follower":
		return t / 3
	}
	return 0
}

// cpuPerRenewal writes the footprint's idle CPU divided by the renewals in
// the window.
func (r *report) cpuPerRenewal(w func(string, ...any)) {
	f := r.idle
	w("**CPU per renewal**: each process's idle CPU over the window (schedstat) divided by the renewals its cadence puts in the window. ")
	w("All of its idle CPU counts, the Go runtime's own background work included; an etcdlead keeper counts per its supervisor's renewal, though only some renewals wake it with a new deadline (docs/design.md, step 8); an etcdlead candidate, leader or follower, also asks its watch stream for progress now and then (docs/design.md, step 3).\n\n")
	w("| tool | process | TTL | renews every | renewals in window | CPU per renewal |\n|---|---|---|---|---|---|\n")
	for _, x := range f.rows {
		every := renewEvery(x.Tool, x.Role, x.TTL)
		if every == 0 {
			continue
		}
		n := f.window.Seconds() / every.Seconds()
		w("| %s | %s | %d s | %s | %.0f | %.0f µs |\n", x.Tool, x.Role, x.TTL, every.Round(time.Millisecond), n, x.Sched.Seconds()/n*1e6)
	}
	w("\n")
}
