package model

// kind names a step; the names are the protocol's (docs/design.md).
type kind uint8

const (
	kTick kind = iota
	kExpire
	kRaftChange
	kSweep
	kHandDeleteQueue
	kHandDeleteSentinel
	kHandRevoke
	kHandEditRecord
	kChildGone
	kKill // and restart
	kFreeze
	kThaw
	kGrant
	kEnqueue
	kGuard
	kStartRead
	kLeaseGone
	kRemoveRecord
	kStart
	kRenew
	kQuit
	kEnd
	kRevoke
	kEarlyEnd
)

var kindNames = [...]string{
	kTick: "tick", kExpire: "expire", kRaftChange: "raftChange", kSweep: "sweep",
	kHandDeleteQueue: "handDeleteQueue", kHandDeleteSentinel: "handDeleteSentinel",
	kHandRevoke: "handRevoke", kHandEditRecord: "handEditRecord", kChildGone: "childGone",
	kKill: "kill+restart", kFreeze: "freeze", kThaw: "thaw",
	kGrant: "grant", kEnqueue: "enqueue", kGuard: "guard", kStartRead: "startRead",
	kLeaseGone: "leaseGone", kRemoveRecord: "removeRecord", kStart: "start", kRenew: "renew",
	kQuit: "quit", kEnd: "end", kRevoke: "revoke", kEarlyEnd: "earlyEnd",
}

func (k kind) String() string { return kindNames[k] }

// step is one transition: what, by whom (a candidate's index, or -1 for
// etcd, the operator or a keeper), on which lease, and a variant where a
// step has more than one outcome.
type step struct {
	kind kind
	who  int8
	l    uint8
	alt  uint8
}

// emit receives each successor of a state.
type emit func(step, state)

// successors calls e with every state one step from s.
//
//go:norace
func (cfg *config) successors(s state, e emit) {
	for i := 0; i < cfg.candidates; i++ {
		cfg.candSteps(s, i, e)
	}
	cfg.etcdSteps(s, e)
	cfg.operatorSteps(s, e)
	cfg.timeSteps(s, e)
}

// candSteps are candidate i's: its process's faults, then its protocol's
// steps while it runs.
//
//go:norace
func (cfg *config) candSteps(s state, i int, e emit) {
	c := &s.cands[i]
	who := int8(i)
	if c.proc == frozen {
		n := s
		n.cands[i].proc = running
		e(step{kind: kThaw, who: who}, n)
		return
	}
	if c.phase != idle && int(s.faults) < cfg.faults {
		// kill, and restart: the new process has no memory. A killed
		// process that is not yet back does what an idle one that does
		// not campaign yet does, nothing: one step stands for both.
		n := s
		n.faults++
		if k := n.kid(c.l); k != nil {
			k.stopping = true // its keeper stops the child at once or by the fence
		}
		n.cands[i] = cand{}
		e(step{kind: kKill, who: who, l: c.l}, n)

		n = s
		n.faults++
		n.cands[i].proc = frozen
		e(step{kind: kFreeze, who: who, l: c.l}, n)
	}
	if cfg.proto == newProtocol {
		cfg.newSteps(s, i, e)
	} else {
		cfg.oldSteps(s, i, e)
	}
}

// grant is step 1 (Grant): a fresh lease with TTL T; g is the raft term now.
//
//go:norace
func (cfg *config) grant(s state, i int, e emit) {
	if int(s.nLease) >= cfg.grants || s.cands[i].sitOut > 0 {
		return
	}
	n := s
	n.nLease++
	l := n.nLease
	T := int8(cfg.ttl)
	n.leases[l] = lease{alive: true, expiry: T, g: s.raft}
	c := &n.cands[i]
	c.phase, c.l, c.d = granted, l, T
	c.watch, c.watchQ, c.woke, c.pending, c.hold = 0, false, false, 0, 0
	c.own |= bit(l)
	e(step{kind: kGrant, who: int8(i), l: l}, n)
}

// enqueue is step 2 (the campaign transaction): Q/L and S/L (and, new,
// REC/L) in one revision R; a lease already gone fails it.
//
//go:norace
func (cfg *config) enqueue(s state, i int, e emit) {
	n := s
	c := &n.cands[i]
	ls := &n.leases[c.l]
	if !ls.alive {
		cfg.sitOut(&n, i)
		c.phase, c.l = idle, 0
		e(step{kind: kEnqueue, who: int8(i), l: s.cands[i].l, alt: 1}, n)
		return
	}
	r := n.write()
	ls.rev, ls.q, ls.s = r, true, true
	if cfg.proto == newProtocol {
		ls.rec, ls.recMod, ls.recG = true, r, ls.g
	} else {
		cfg.replay(&n, i)
		watchAhead(&n, i) // the transaction reads both prefixes: the wait watches from it
	}
	c.phase = waiting
	e(step{kind: kEnqueue, who: int8(i), l: c.l}, n)
}

// renew is step 8 (Lead; a waiter renews too): credited while the lease
// lives, or up to ET after its sweep by a stale raft leader; else the
// answer "lease gone" loses the term.
//
//go:norace
func (cfg *config) renew(s state, i int, e emit) {
	ls := &s.leases[s.cands[i].l]
	switch {
	case ls.alive && ls.expiry > 0:
		cfg.credit(s, i, 0, e)
	case ls.swept && ls.sweptAgo <= et:
		cfg.credit(s, i, 1, e)
		cfg.renewLost(s, i, e)
	default:
		cfg.renewLost(s, i, e)
	}
}

// credit is a renewal's credit: the deadline, etcd's expiry and the
// keeper's fence move to a TTL from the send.
//
//go:norace
func (cfg *config) credit(s state, i int, alt uint8, e emit) {
	n := s
	T := int8(cfg.ttl)
	c := &n.cands[i]
	c.d = T
	if ls := &n.leases[c.l]; ls.alive {
		ls.expiry = T
	}
	if k := n.kid(c.l); k != nil {
		k.d = T
	}
	if cfg.proto == oldProtocol && c.phase == leading {
		c.judged = max(c.judged, n.rev) // the renewals' answers move judged on
	}
	e(step{kind: kRenew, who: int8(i), l: c.l, alt: alt}, n)
}

// renewLost is a renewal answered "lease gone": the term is lost.
//
//go:norace
func (cfg *config) renewLost(s state, i int, e emit) {
	if s.cands[i].phase == ending {
		return
	}
	n := s
	cfg.lose(&n, i)
	e(step{kind: kRenew, who: int8(i), l: s.cands[i].l, alt: 2}, n)
}

// lose ends a term that lost its keys or its lease (step 9): the
// supervisor stops the child.
//
//go:norace
func (cfg *config) lose(n *state, i int) {
	cfg.sitOut(n, i)
	cfg.stop(n, i)
}

// stop ends the term (step 9): the supervisor stops the child, which takes
// it any time up to its fence.
//
//go:norace
func (cfg *config) stop(n *state, i int) {
	c := &n.cands[i]
	c.phase = ending
	c.sub, c.watch, c.watchQ = subNone, 0, false
	if k := n.kid(c.l); k != nil {
		k.stopping = true
	}
}

// start is step 7: the keeper forks the child unless the deadline passed,
// which loses the term.
//
//go:norace
func (cfg *config) start(s state, i int, e emit) {
	n := s
	c := &n.cands[i]
	if c.d == 0 {
		cfg.stop(&n, i)
		e(step{kind: kStart, who: int8(i), l: c.l, alt: 1}, n)
		return
	}
	slot := 0
	if n.kids[0].l != 0 {
		slot = 1
	}
	n.kids[slot] = child{l: c.l, d: c.d}
	c.phase = leading
	e(step{kind: kStart, who: int8(i), l: c.l}, n)
}

// noChild reports whether candidate i's term has no child alive.
//
//go:norace
func (s *state) noChild(i int) bool { return s.kid(s.cands[i].l) == nil }
