package model

// newSteps are a running candidate's steps in the new protocol.
//
//go:norace
func (cfg *config) newSteps(s state, i int, e emit) {
	c := &s.cands[i]
	switch c.phase {
	case idle:
		cfg.grant(s, i, e)
	case granted:
		cfg.enqueue(s, i, e)
	case waiting:
		// wait (step 4) is no step of its own: a watch only wakes the
		// term, and one that breaks or wakes for nothing may wake it at
		// any time, so the term may read at any time.
		cfg.guard(s, i, e)
		cfg.startRead(s, i, e)
		cfg.clearEnded(s, i, e)
		cfg.renew(s, i, e)
		cfg.quit(s, i, e)
	case ready:
		cfg.guard(s, i, e)
		cfg.start(s, i, e)
		cfg.renew(s, i, e)
		cfg.quit(s, i, e)
	case leading:
		cfg.guard(s, i, e)
		cfg.renew(s, i, e)
		cfg.quit(s, i, e)
	case ending:
		cfg.end(s, i, e)
		cfg.renew(s, i, e)
	case revoking:
		cfg.revoke(s, i, e)
	}
}

// intact reports whether the term's own keys (new: and record) are as its
// enqueue put them.
//
//go:norace
func (cfg *config) intact(s state, l uint8) bool {
	ls := &s.leases[l]
	ok := ls.q && ls.s
	if cfg.proto == newProtocol {
		ok = ok && ls.rec && ls.recMod == ls.rev
	}
	return ok
}

// guard is step 3 (The guard): a delete or replacement of an own key (new:
// or of the record) loses the term. Its watch hears of it some time
// later: the term's other steps go on meanwhile, a start by the keeper
// too.
//
//go:norace
func (cfg *config) guard(s state, i int, e emit) {
	if cfg.intact(s, s.cands[i].l) {
		return
	}
	n := s
	cfg.lose(&n, i)
	e(step{kind: kGuard, who: int8(i), l: s.cands[i].l}, n)
}

// quit is a graceful end (step 9: a stop signal, the child's exit, a
// resign request): the supervisor stops the child.
//
//go:norace
func (cfg *config) quit(s state, i int, e emit) {
	n := s
	cfg.stop(&n, i)
	e(step{kind: kQuit, who: int8(i), l: s.cands[i].l}, n)
}

// newStartRead is step 5 (The start read) with records: the term may
// start only when it shows its own keys and record intact and no queue
// key, sentinel or record below R. It goes on to clear a record that it
// shows without its term's keys (clearEnded), any one of them. A hold
// reads again only once its record moved.
//
//go:norace
func (cfg *config) newStartRead(s state, i int, e emit) {
	c := &s.cands[i]
	if c.sub == subRemove || !cfg.intact(s, c.l) {
		return
	}
	if c.sub == subHold {
		if x := &s.leases[c.x]; x.rec && x.recMod == c.xMod {
			return
		}
	}
	R := s.leases[c.l].rev
	clear, ended := true, false
	for x := uint8(1); x <= s.nLease; x++ {
		ls := &s.leases[x]
		if ls.rev == 0 || ls.rev >= R || !ls.q && !ls.s && !ls.rec {
			continue
		}
		clear = false // startRead: a record counts as a term ahead
		if ls.rec && !ls.q && !ls.s {
			ended = true
			n := s
			nc := &n.cands[i]
			nc.sub, nc.x, nc.xMod, nc.xG, nc.until = subAsk, x, ls.recMod, ls.recG, 0
			e(step{kind: kStartRead, who: int8(i), l: c.l, alt: x}, n)
		}
	}
	if clear || !ended && c.sub != subNone {
		n := s
		nc := &n.cands[i]
		nc.sub = subNone
		if clear {
			nc.phase = ready
		}
		e(step{kind: kStartRead, who: int8(i), l: c.l}, n)
	}
}

// clearEnded is step 4's (Wait) clearing of an ended term's record REC/x,
// one that the last read showed without Q/x and S/x: leaseGone, endedHold,
// removeRecord.
//
//go:norace
func (cfg *config) clearEnded(s state, i int, e emit) {
	switch c := &s.cands[i]; {
	case c.sub == subAsk:
		cfg.leaseGone(s, i, e)
	case c.sub == subRemove, c.sub == subHold && c.until == 0:
		cfg.removeRecord(s, i, e)
	}
}

// leaseGone asks LeaseTimeToLive(x) (step 4, clearEnded): only -1 moves
// on, to the hold or the removal.
//
//go:norace
func (cfg *config) leaseGone(s state, i int, e emit) {
	c := &s.cands[i]
	if s.leases[c.x].alive {
		return // ask again later
	}
	n := s
	cfg.endedHold(&n, i)
	e(step{kind: kLeaseGone, who: int8(i), l: c.x}, n)
}

// endedHold is step 4's hold (clearEnded): after a raft change since the
// record's grant, the lease may have been swept while its child runs, with
// renewals credited up to ET later: hold until the answer plus T_rec + μ.
//
//go:norace
func (cfg *config) endedHold(n *state, i int) {
	c := &n.cands[i]
	if n.raft > c.xG {
		c.sub, c.until = subHold, int8(cfg.ttl)+mu
		return
	}
	c.sub = subRemove
}

// removeRecord deletes REC/x (step 4, clearEnded) in a transaction that
// compares its mod revision with the one read; then the waiter reads again.
//
//go:norace
func (cfg *config) removeRecord(s state, i int, e emit) {
	n := s
	c := &n.cands[i]
	x := &n.leases[c.x]
	if x.rec && x.recMod == c.xMod {
		n.write()
		x.rec = false
	}
	l := c.x
	c.sub = subNone
	e(step{kind: kRemoveRecord, who: int8(i), l: l}, n)
}

// newEnd is step 9 (End of term, Term.Revoke) once the child and its tree
// are gone: one transaction deletes REC/L, Q/L and S/L; revoke follows.
//
//go:norace
func (cfg *config) newEnd(s state, i int, e emit) {
	if !s.noChild(i) {
		return
	}
	n := s
	c := &n.cands[i]
	ls := &n.leases[c.l]
	if ls.q || ls.s || ls.rec {
		n.write()
		ls.q, ls.s, ls.rec = false, false, false
	}
	c.phase = revoking
	e(step{kind: kEnd, who: int8(i), l: c.l}, n)
}

// revoke is step 9's revoke of L, after its keys and record are gone.
//
//go:norace
func (cfg *config) revoke(s state, i int, e emit) {
	n := s
	c := &n.cands[i]
	l := c.l
	n.leases[l].alive = false
	n.endKeys(l, false)
	c.phase, c.l, c.d = idle, 0, 0
	e(step{kind: kRevoke, who: int8(i), l: l}, n)
}
