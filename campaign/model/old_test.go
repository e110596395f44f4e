package model

// oldSteps are a running candidate's steps in the old protocol.
//
//go:norace
func (cfg *config) oldSteps(s state, i int, e emit) {
	c := &s.cands[i]
	switch c.phase {
	case idle:
		cfg.grant(s, i, e)
	case granted:
		cfg.enqueue(s, i, e)
	case waiting:
		cfg.guard(s, i, e)
		cfg.earlyEnd(s, i, e)
		cfg.startRead(s, i, e)
		cfg.renew(s, i, e)
		cfg.quit(s, i, e)
	case ready:
		cfg.guard(s, i, e)
		if holdUntil(s, i) {
			cfg.start(s, i, e)
		}
		cfg.renew(s, i, e)
		cfg.quit(s, i, e)
	case leading:
		cfg.guard(s, i, e)
		cfg.renew(s, i, e)
		cfg.quit(s, i, e)
	case ending:
		cfg.end(s, i, e)
		cfg.renew(s, i, e)
	}
}

// startRead is step 5 (The start read).
//
//go:norace
func (cfg *config) startRead(s state, i int, e emit) {
	if cfg.proto == newProtocol {
		cfg.newStartRead(s, i, e)
		return
	}
	cfg.oldStartRead(s, i, e)
}

// end is step 9 (End of term), once the child and its tree are gone.
//
//go:norace
func (cfg *config) end(s state, i int, e emit) {
	if cfg.proto == newProtocol {
		cfg.newEnd(s, i, e)
		return
	}
	cfg.oldEnd(s, i, e)
}

// watched reports whether the key the wait watches is gone since the read.
//
//go:norace
func watched(s state, c *cand) bool {
	if c.watch == 0 {
		return false
	}
	w := &s.leases[c.watch]
	return c.watchQ && !w.q || !c.watchQ && !w.s
}

// earlyEnd is step 4's wake-up (Wait; earlyEnd in main's
// campaign/early.go): the watched sentinel's delete, after a raft change
// since its grant and without released, holds the start and the revoke
// for T from now; a lease still alive is pending. (The code holds the
// start only when the lease is gone by then; the model holds it either
// way, the safe side.)
//
//go:norace
func (cfg *config) earlyEnd(s state, i int, e emit) {
	c := &s.cands[i]
	if !watched(s, c) {
		return
	}
	n := s
	nc := &n.cands[i]
	w := &s.leases[c.watch]
	if w.alive {
		nc.pending |= bit(c.watch)
	}
	if !c.watchQ && s.raft > w.g && !w.released {
		nc.hold = max(nc.hold, int8(cfg.ttl))
	}
	nc.watch, nc.watchQ, nc.woke = 0, false, true
	e(step{kind: kEarlyEnd, who: int8(i), l: c.watch}, n)
}

// oldStartRead is step 5 (The start read) without records: clear when it
// shows its own keys intact, no queue key or sentinel below R, and every
// pending lease is gone; else
// the wait watches the nearest sentinel ahead (or queue key, its sentinel
// gone). A read after a wake-up moves judged on. Unless wake-ups may be
// missed, the one the watch has is taken first.
//
//go:norace
func (cfg *config) oldStartRead(s state, i int, e emit) {
	c := &s.cands[i]
	if !cfg.missWakeUps && watched(s, c) || !cfg.intact(s, c.l) {
		return
	}
	n := s
	nc := &n.cands[i]
	if nc.woke {
		nc.judged = max(nc.judged, s.rev)
		nc.woke = false
	}
	if watchAhead(&n, i) {
		e(step{kind: kStartRead, who: int8(i), l: c.l}, n)
		return
	}
	for x := uint8(1); x <= s.nLease; x++ {
		if c.pending&bit(x) != 0 && s.leases[x].alive {
			e(step{kind: kStartRead, who: int8(i), l: c.l, alt: 1}, n)
			return
		}
	}
	nc.phase, nc.pending = ready, 0
	e(step{kind: kStartRead, who: int8(i), l: c.l}, n)
}

// watchAhead is what the wait watches from a read (step 4): the nearest
// sentinel below R, or, with none, the nearest queue key. It reports
// whether there is one.
//
//go:norace
func watchAhead(n *state, i int) bool {
	c := &n.cands[i]
	R := n.leases[c.l].rev
	var ns, nq uint8
	for x := uint8(1); x <= n.nLease; x++ {
		ls := &n.leases[x]
		if ls.rev == 0 || ls.rev >= R {
			continue
		}
		if ls.s && (ns == 0 || ls.rev > n.leases[ns].rev) {
			ns = x
		}
		if ls.q && (nq == 0 || ls.rev > n.leases[nq].rev) {
			nq = x
		}
	}
	c.watch, c.watchQ = ns, false
	if ns == 0 && nq != 0 {
		c.watch, c.watchQ = nq, true
	}
	return c.watch != 0
}

// holdUntil is step 4's hold of an early end ahead (Term.holdUntil): no
// start before it.
//
//go:norace
func holdUntil(s state, i int) bool { return s.cands[i].hold == 0 }

// sitOut is step 1's sit-out (Campaigner.sitOut): a term whose keys or
// lease went before its deadline, or after the raft term moved past its
// grant's, keeps its candidate from granting for T from now.
//
//go:norace
func (cfg *config) sitOut(n *state, i int) {
	c := &n.cands[i]
	if cfg.proto != oldProtocol {
		return
	}
	if c.d > 0 || n.raft > n.leases[c.l].g {
		c.sitOut = int8(cfg.ttl)
	}
}

// replay is step 4's replay (Term.replay), at the enqueue: a candidate that
// had a term judges every sentinel delete since judged, up to its own,
// but its own terms', as a waiter would, from now. A first term has nothing
// to replay.
//
//go:norace
func (cfg *config) replay(n *state, i int) {
	c := &n.cands[i]
	R := n.leases[c.l].rev
	if c.judged != 0 {
		for x := uint8(1); x <= n.nLease; x++ {
			ls := &n.leases[x]
			if c.own&bit(x) != 0 || ls.sDel <= c.judged || ls.sDel >= R {
				continue
			}
			if n.raft > ls.g && !ls.released {
				c.hold = max(c.hold, int8(cfg.ttl))
			}
		}
	}
	c.judged = max(c.judged, R)
	c.own = bit(c.l)
}

// oldEnd is step 9 (End of term) in the old protocol: after the hold
// (awaitHold), released into the sentinel when the raft term moved since
// the grant, and the revoke, which deletes both keys.
//
//go:norace
func (cfg *config) oldEnd(s state, i int, e emit) {
	if !s.noChild(i) || !holdUntil(s, i) {
		return
	}
	n := s
	c := &n.cands[i]
	l := c.l
	released := n.raft > n.leases[l].g
	n.leases[l].alive = false
	n.endKeys(l, released)
	c.phase, c.l, c.d = idle, 0, 0
	c.hold, c.pending, c.watch, c.watchQ, c.woke = 0, 0, 0, false, false
	e(step{kind: kEnd, who: int8(i), l: l}, n)
}
