package model

// timeSteps are the tick and the keepers' reports that a child is gone.
//
//go:norace
func (cfg *config) timeSteps(s state, e emit) {
	n := s
	n.tick()
	e(step{kind: kTick, who: -1}, n)
	for i, k := range s.kids {
		// childGone: the keeper reports the child's tree gone (step 9).
		if k.stopping {
			n := s
			n.kids[i] = child{}
			e(step{kind: kChildGone, who: -1, l: k.l}, n)
		}
	}
}

// tick moves time on; each keeper's fence fires at its deadline (step 7,
// "The keeper"), whatever its supervisor does.
//
//go:norace
func (s *state) tick() {
	for l := uint8(1); l <= s.nLease; l++ {
		ls := &s.leases[l]
		down(&ls.expiry)
		if ls.swept {
			ls.sweptAgo++
		}
	}
	for i := range s.cands {
		c := &s.cands[i]
		down(&c.d)
		down(&c.until)
		down(&c.hold)
		down(&c.sitOut)
	}
	for i := range s.kids {
		k := &s.kids[i]
		if k.l == 0 {
			continue
		}
		if k.d--; k.d > 0 {
			continue
		}
		for j := range s.cands {
			if c := &s.cands[j]; c.l == k.l && c.phase == leading {
				c.phase = ending
			}
		}
		*k = child{}
	}
}

// down counts a timer down to 0.
//
//go:norace
func down(t *int8) {
	if *t > 0 {
		*t--
	}
}

//go:norace
func (cfg *config) etcdSteps(s state, e emit) {
	if int(s.raft)-1 < cfg.raftChanges {
		n := s
		n.raft++ // raftChange: a new raft leader is elected
		e(step{kind: kRaftChange, who: -1}, n)
	}
	for l := uint8(1); l <= s.nLease; l++ {
		ls := &s.leases[l]
		if !ls.alive {
			continue
		}
		if ls.expiry == 0 {
			// expire: etcd's expiry loop ends the lease, late or on time, never early.
			n := s
			n.leases[l].alive = false
			n.endKeys(l, false)
			e(step{kind: kExpire, who: -1, l: l}, n)
		}
		if ls.g < s.raft && int(s.sweeps) < cfg.sweeps {
			// sweep: a replaced raft leader that applied the grant resumes
			// and revokes the lease early ("An early end after a raft
			// leader change").
			n := s
			n.sweeps++
			nl := &n.leases[l]
			nl.alive, nl.swept, nl.sweptAgo = false, true, 0
			n.endKeys(l, false)
			e(step{kind: kSweep, who: -1, l: l}, n)
		}
	}
}

// operatorSteps are the hand edits of assumption 3 ("The promise and what
// it assumes").
//
//go:norace
func (cfg *config) operatorSteps(s state, e emit) {
	if int(s.hands) >= cfg.hands {
		return
	}
	for l := uint8(1); l <= s.nLease; l++ {
		ls := &s.leases[l]
		if cfg.handKeys && ls.q {
			cfg.hand(s, kHandDeleteQueue, l, 0, e)
		}
		if cfg.handKeys && ls.s {
			cfg.hand(s, kHandDeleteSentinel, l, 0, e)
		}
		if cfg.handRevoke && ls.alive {
			cfg.hand(s, kHandRevoke, l, 0, e)
		}
		if cfg.handEditRecord && ls.rec {
			cfg.hand(s, kHandEditRecord, l, 0, e) // delete
			cfg.hand(s, kHandEditRecord, l, 1, e) // put
		}
	}
}

// hand is one operator step on lease l's keys or record.
//
//go:norace
func (cfg *config) hand(s state, k kind, l uint8, alt uint8, e emit) {
	n := s
	n.hands++
	ls := &n.leases[l]
	switch {
	case k == kHandDeleteQueue:
		n.write()
		ls.q = false
	case k == kHandDeleteSentinel:
		ls.sDel, ls.released, ls.s = n.write(), false, false
	case k == kHandRevoke:
		ls.alive = false
		n.endKeys(l, false)
	case alt == 0:
		n.write()
		ls.rec = false
	default:
		ls.recMod, ls.recG = n.write(), n.raft
	}
	e(step{kind: k, who: -1, l: l, alt: alt}, n)
}
