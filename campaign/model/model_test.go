package model

import "fmt"

// protocol is the term protocol a search runs.
type protocol uint8

const (
	oldProtocol protocol = iota // today's: sentinel, hold, sit-out, replay
	newProtocol                 // the term record
)

func (p protocol) String() string {
	if p == newProtocol {
		return "new"
	}
	return "old"
}

// Time, in ticks.
const (
	et = 1      // etcd's election timeout: how long after a sweep a stale raft leader may still credit a renewal
	m  = 0      // the fence margin: a child is alive at ticks before its deadline, dead from it on
	mu = et + m // μ: what the hold after a raft change adds to the record's TTL
)

// Bounds of the state's arrays and of its packed key.
const (
	maxGrants = 4
	maxCands  = 3
	maxTTL    = 4
	maxRaft   = 3
)

// config is one search: the protocol, the bounds, and which faults and
// operator steps may happen.
type config struct {
	proto       protocol
	candidates  int
	ttl         int // T
	grants      int // leases granted in all
	raftChanges int
	sweeps      int
	faults      int // kills and freezes in all
	hands       int // operator steps in all
	// Operator steps: delete a queue key or a sentinel, revoke a lease,
	// delete or put a term record (new only).
	handKeys, handRevoke, handEditRecord bool
	// missWakeUps lets an old waiter miss the delete it watches, as a watch
	// that breaks does.
	missWakeUps bool
}

func (c config) String() string {
	ops := ""
	for _, o := range []struct {
		on   bool
		name string
	}{{c.handKeys, "handDeleteQueue handDeleteSentinel"}, {c.handRevoke, "handRevoke"}, {c.handEditRecord, "handEditRecord"}} {
		if o.on {
			ops += " " + o.name
		}
	}
	if ops == "" {
		ops = " none"
	}
	return fmt.Sprintf("%s protocol, %d candidates, T=%d, grants≤%d, raft changes≤%d, sweeps≤%d, faults≤%d, operator steps≤%d (%s), missed wake-ups %v, time unbounded",
		c.proto, c.candidates, c.ttl, c.grants, c.raftChanges, c.sweeps, c.faults, c.hands, ops[1:], c.missWakeUps)
}

func (c config) check() error {
	switch {
	case c.candidates < 1 || c.candidates > maxCands:
		return fmt.Errorf("candidates %d: want 1..%d", c.candidates, maxCands)
	case c.ttl < 1 || c.ttl > maxTTL:
		return fmt.Errorf("ttl %d: want 1..%d", c.ttl, maxTTL)
	case c.grants < 0 || c.grants > maxGrants:
		return fmt.Errorf("grants %d: want 0..%d", c.grants, maxGrants)
	case c.raftChanges < 0 || c.raftChanges+1 > maxRaft:
		return fmt.Errorf("raft changes %d: want 0..%d", c.raftChanges, maxRaft-1)
	case c.sweeps > 3 || c.faults > 3 || c.hands > 3:
		return fmt.Errorf("sweeps, faults and operator steps: want at most 3 each")
	}
	return nil
}

// Times are ticks from now: the model is the same at every tick, so a
// state keeps no clock, and the search covers every horizon. A timer at 0
// has passed (or was never set).

// lease is etcd's lease and the keys of the term on it, all named after it:
// queue key Q/L and sentinel S/L on the lease, record REC/L on none.
type lease struct {
	alive    bool
	expiry   int8  // etcd's expire may run once it is 0, late or on time
	g        uint8 // the raft term when it was granted
	swept    bool
	sweptAgo int8  // ticks since its sweep, while a stale renewal may still be credited
	rev      uint8 // R: create revision of Q/L, S/L and REC/L; 0 before enqueue
	q, s     bool  // Q/L and S/L exist
	rec      bool  // REC/L exists
	recMod   uint8 // REC/L's mod revision
	recG     uint8 // the raft term REC/L records
	// Old protocol: etcd's history of S/L, which a replay reads.
	sDel     uint8 // revision of S/L's delete; 0 while it exists
	released bool  // the deleted S/L said released
}

// Supervisor process states. A killed one is restarted in the same step
// (candSteps).
const (
	running uint8 = iota
	frozen
)

// Phases of a candidate's term.
const (
	idle     uint8 = iota
	granted        // lease granted, keys not yet put
	waiting        // keys put, not yet clear to start
	ready          // the start read showed nothing older
	leading        // the child was started
	ending         // the term is over: its child is being stopped
	revoking       // new: keys and record deleted, the lease not yet revoked
)

// Sub-phases of a new waiter's clearEnded.
const (
	subNone   uint8 = iota
	subAsk          // leaseGone: asking LeaseTimeToLive(x)
	subHold         // endedHold: holding for until
	subRemove       // removeRecord: deleting REC/x if unchanged
)

// cand is one candidate: its supervisor process and its current term.
type cand struct {
	proc  uint8
	phase uint8
	l     uint8 // the term's lease
	d     int8  // the term's deadline
	// New protocol: the ended record being cleared, as last read.
	sub   uint8
	x     uint8
	xMod  uint8
	xG    uint8
	until int8
	// Old protocol, this term.
	watch   uint8 // the lease whose key ahead the wait watches
	watchQ  bool  // it watches Q/watch, S/watch being gone at the read
	woke    bool  // a wake-up came since the last read
	pending uint8 // leases seen losing their keys while alive (bit per lease)
	hold    int8  // no start, nor revoke, before it passes
	// Old protocol, the candidate's memory across terms.
	sitOut int8  // no grant before it passes
	judged uint8 // the revision up to which it has looked
	own    uint8 // its own leases since its last replay (bit per lease)
}

// child is a child process and its keeper's fence.
type child struct {
	l        uint8 // its term's lease; 0: no child
	d        int8  // the fence: dead when it reaches 0
	stopping bool  // its supervisor or keeper is stopping it
}

// state is one state of the whole system.
type state struct {
	rev    uint8
	raft   uint8
	nLease uint8 // leases granted so far: ids 1..nLease
	sweeps uint8
	faults uint8
	hands  uint8
	leases [maxGrants + 1]lease
	cands  [maxCands]cand
	kids   [2]child
}

func initial() state { return state{raft: 1, rev: 1} }

// write is one revision of etcd's.
//
//go:norace
func (s *state) write() uint8 {
	s.rev++
	return s.rev
}

// endKeys deletes, in one revision, the keys on lease l, as etcd does when
// l ends.
//
//go:norace
func (s *state) endKeys(l uint8, released bool) {
	ls := &s.leases[l]
	if !ls.q && !ls.s {
		return
	}
	r := s.write()
	if ls.s {
		ls.sDel, ls.released = r, released
	}
	ls.q, ls.s = false, false
}

// kid is the child of lease l's term, or nil.
//
//go:norace
func (s *state) kid(l uint8) *child {
	for i := range s.kids {
		if s.kids[i].l == l && l != 0 {
			return &s.kids[i]
		}
	}
	return nil
}

// violates is the promise broken: two children alive at once.
//
//go:norace
func (s *state) violates() bool { return s.kids[0].l != 0 && s.kids[1].l != 0 }

// bit is lease l's bit in a set of leases.
//
//go:norace
func bit(l uint8) uint8 { return 1 << l }
