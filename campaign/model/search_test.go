package model

import (
	"fmt"
	"runtime"
	"slices"
	"time"
)

// result is what a search found.
type result struct {
	states int           // distinct states visited
	depth  int           // steps from the initial state to the deepest level reached
	took   time.Duration // wall time
	trace  []string      // a shortest counterexample, nil when there is none
}

// explore searches breadth first every state reachable within cfg's
// bounds, each once, and stops at the first that breaks the promise.
func explore(cfg config) result {
	if err := cfg.check(); err != nil {
		panic(err)
	}
	// A search holds every state it visited, pointer-free: the last
	// search's are garbage, and a collection now costs little and keeps
	// the two from being held at once.
	runtime.GC()
	start := time.Now()
	init := initial().normalized(&cfg)
	x := &bfs{cfg: cfg, seen: newVisited(), bad: -1}
	x.seen.add(init.key(), -1)
	level, ids := []state{init}, []int32{0}
	depth := 0
	for len(level) > 0 && x.bad < 0 {
		x.expand(level, ids)
		// The level done lends its arrays to the one after next: under
		// -race every allocation costs in proportion to its size.
		level, ids, x.next, x.nextIDs = x.next, x.nextIDs, level[:0], ids[:0]
		depth++
	}
	r := result{states: x.seen.n, depth: depth, took: time.Since(start)}
	if x.bad >= 0 {
		r.trace = x.cfg.replayPath(x.seen, x.bad)
	} else {
		r.depth-- // the last level had no new state
	}
	return r
}

// bfs is a breadth-first search's visited set and next level.
type bfs struct {
	cfg     config
	seen    *visited
	next    []state
	nextIDs []int32
	from    int32 // the id of the state being expanded
	bad     int32 // the id of a state that breaks the promise, or -1
}

// expand visits every successor of a level's states.
//
//go:norace
func (x *bfs) expand(level []state, ids []int32) {
	visit := x.visit
	for j := range level {
		x.from = ids[j]
		x.cfg.successors(level[j], visit)
		if x.bad >= 0 {
			return
		}
	}
}

// visit adds n to the visited set and the next level, unless it was
// visited; a state that breaks the promise ends the search, and one that
// can no longer break it is not expanded.
//
//go:norace
func (x *bfs) visit(_ step, n state) {
	if x.bad >= 0 {
		return
	}
	n = n.normalized(&x.cfg)
	id, added := x.seen.add(n.key(), x.from)
	if !added {
		return
	}
	switch {
	case n.violates():
		x.bad = id
	case !n.settled(&x.cfg):
		x.next = append(x.next, n)
		x.nextIDs = append(x.nextIDs, id)
	}
}

// replayPath walks the path to state id again from the initial state,
// naming each step: the visited set keeps keys and parents only, and a key
// sorts the candidates and the leases, so each step is found again by its
// successor's key. The walk goes on from the successors as they are, not
// normalized, so that names stay put along the trace.
func (cfg *config) replayPath(seen *visited, id int32) []string {
	var path []key
	for i := id; i > 0; i = seen.node(i).parent {
		path = append(path, seen.node(i).k)
	}
	slices.Reverse(path)
	s := initial()
	var trace []string
	at := 0 // ticks since the start, for the reader
	for _, want := range path {
		var found bool
		var took step
		var to state
		cfg.successors(s, func(st step, n state) {
			if !found && n.normalized(cfg).key() == want {
				found, took, to = true, st, n
			}
		})
		if !found {
			panic("model: a step of the path cannot be found again")
		}
		trace = append(trace, cfg.describe(took, at, &s, &to))
		to.rankRevisions() // the raw counter would outgrow a rank's bits
		if s = to; took.kind == kTick {
			at++
		}
	}
	return trace
}

// describe is one step of a trace, for a reader: the tick it happens at,
// who takes it, and what it did.
func (cfg *config) describe(st step, at int, b, a *state) string {
	who := "etcd"
	switch {
	case st.who >= 0:
		who = string(rune('A' + st.who))
	case st.kind == kChildGone, st.kind == kTick:
		who = "keeper"
	case st.kind >= kHandDeleteQueue && st.kind <= kHandEditRecord:
		who = "operator"
	}
	line := fmt.Sprintf("t=%d %s %s", at, who, st.kind)
	if st.l != 0 {
		line += fmt.Sprintf(" L%d", st.l)
	}
	return line + cfg.detail(st, at, b, a)
}

// detail says what a step's outcome was, where it has more than one or
// where the numbers help.
func (cfg *config) detail(st step, at int, b, a *state) string {
	var c *cand
	if st.who >= 0 {
		c = &a.cands[st.who]
	}
	abs := func(t int8) int { return at + int(t) }
	switch st.kind {
	case kTick:
		return fmt.Sprintf(" to t=%d", at+1)
	case kRaftChange:
		return fmt.Sprintf(" to raft term %d", a.raft)
	case kSweep:
		return fmt.Sprintf(" (granted in raft term %d)", b.leases[st.l].g)
	case kGrant:
		return fmt.Sprintf(" (raft term %d, deadline %d)", a.leases[st.l].g, abs(c.d))
	case kEnqueue:
		if st.alt == 1 {
			return ": the lease is gone"
		}
		if c.hold > 0 {
			return fmt.Sprintf(", replay holds the start until %d", abs(c.hold))
		}
	case kEarlyEnd:
		if c.hold > 0 {
			return fmt.Sprintf(" gone: hold the start until %d", abs(c.hold))
		}
		return " gone"
	case kStartRead:
		switch {
		case cfg.proto == newProtocol && c.sub == subAsk:
			return fmt.Sprintf(": ended term L%d ahead", st.alt)
		case c.phase == ready:
			return ": nothing older"
		}
		return ": waits"
	case kLeaseGone:
		if c.sub == subHold {
			return fmt.Sprintf(" -1 after a raft change: hold until %d", abs(c.until))
		}
		return " -1"
	case kStart:
		if st.alt == 1 {
			return ": refused, past the deadline"
		}
		k := a.kid(st.l)
		if o := other(a, st.l); o.l != 0 {
			return fmt.Sprintf(" (fence %d) beside the child of L%d (fence %d): two children alive",
				abs(k.d), o.l, abs(o.d))
		}
		return fmt.Sprintf(" (fence %d)", abs(k.d))
	case kRenew:
		switch st.alt {
		case 0:
			return fmt.Sprintf(": credited, deadline %d", abs(c.d))
		case 1:
			return fmt.Sprintf(": credited by a stale raft leader, deadline %d", abs(c.d))
		}
		return ": lease gone, the term is lost"
	case kHandEditRecord:
		if st.alt == 0 {
			return " (delete)"
		}
		return fmt.Sprintf(" (put, raft term %d)", a.leases[st.l].recG)
	}
	return ""
}

// other is the child that is not lease l's.
func other(s *state, l uint8) child {
	for _, k := range s.kids {
		if k.l != l && k.l != 0 {
			return k
		}
	}
	return child{}
}
