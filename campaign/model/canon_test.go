package model

import "math/bits"

// settled reports whether no state reachable from s can break the promise:
// the grants are spent, and the terms that may still start a child and the
// children alive number one at most. Only a start breaks it, and only
// beside another child.
//
//go:norace
func (s *state) settled(cfg *config) bool {
	if int(s.nLease) < cfg.grants {
		return false
	}
	n := 0
	for _, k := range s.kids {
		if k.l != 0 {
			n++
		}
	}
	for i := range s.cands {
		if p := s.cands[i].phase; p == granted || p == waiting || p == ready {
			n++
		}
	}
	return n <= 1
}

// normalized maps states that no step can tell apart onto one: leases no
// step reads again, fields the phase does not use, revisions by rank.
//
//go:norace
func (s state) normalized(cfg *config) state {
	for l := uint8(1); l <= s.nLease; l++ {
		ls := &s.leases[l]
		if !ls.alive && !ls.q && !ls.s && !ls.rec && !s.heldOrJudged(l) {
			*ls = lease{}
			continue
		}
		if !ls.alive {
			ls.expiry = 0
			if cfg.proto == newProtocol {
				ls.g = 0 // read only through the record, or by a sweep of a live lease
			}
		}
		if ls.swept && (ls.sweptAgo > et || !s.held(l)) {
			ls.swept, ls.sweptAgo = false, 0
		}
		if !ls.rec {
			ls.recMod, ls.recG = 0, 0
		}
	}
	for i := range s.cands {
		c := &s.cands[i]
		switch {
		case c.phase == idle:
			c.l, c.d = 0, 0
		case c.phase >= ending:
			c.d = 0 // read only by start and sitOut, before the end
		}
		if c.sub == subNone {
			c.x, c.xMod, c.xG, c.until = 0, 0, 0, 0
		}
	}
	s.rankRevisions()
	s.renumberLeases()
	if s.kids[0].l == 0 || s.kids[1].l != 0 && s.kids[1].l < s.kids[0].l {
		s.kids[0], s.kids[1] = s.kids[1], s.kids[0]
	}
	return s
}

// renumberLeases orders the leases by what they hold: a lease's id says
// only which lease it is, so states that differ in ids alone are one.
//
//go:norace
func (s *state) renumberLeases() {
	n := s.nLease
	var order [maxGrants + 1]uint8 // by new id: the old one
	var by [maxGrants + 1]uint64
	for l := uint8(1); l <= n; l++ {
		order[l], by[l] = l, s.leases[l].pack(packer{}).v
	}
	for i := uint8(2); i <= n; i++ {
		for j := i; j > 1 && by[order[j]] < by[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	var to [maxGrants + 1]uint8 // by old id: the new one
	moved := false
	for l := uint8(1); l <= n; l++ {
		to[order[l]] = l
		moved = moved || order[l] != l
	}
	if !moved {
		return
	}
	old := s.leases
	for l := uint8(1); l <= n; l++ {
		s.leases[l] = old[order[l]]
	}
	set := func(m uint8) uint8 {
		var r uint8
		for l := uint8(1); l <= n; l++ {
			if m&bit(l) != 0 {
				r |= bit(to[l])
			}
		}
		return r
	}
	for i := range s.cands {
		c := &s.cands[i]
		c.l, c.x, c.watch = to[c.l], to[c.x], to[c.watch]
		c.pending, c.own = set(c.pending), set(c.own)
	}
	for i := range s.kids {
		s.kids[i].l = to[s.kids[i].l]
	}
}

// held reports whether a candidate's term is on lease l.
//
//go:norace
func (s *state) held(l uint8) bool {
	for i := range s.cands {
		if s.cands[i].l == l {
			return true
		}
	}
	return false
}

// heldOrJudged reports whether a step may still read lease l, gone with
// its keys and record: a term or a child on it, a clearing of its record,
// a watch on it, or a replay that would judge its sentinel's delete.
//
//go:norace
func (s *state) heldOrJudged(l uint8) bool {
	for i := range s.cands {
		c := &s.cands[i]
		if c.l == l || c.x == l || c.watch == l || c.judged != 0 && c.judged < s.leases[l].sDel {
			return true
		}
	}
	return s.kid(l) != nil
}

// rankRevisions renumbers revisions by rank: only their order and equality
// decide anything, and the next write is above them all.
//
//go:norace
func (s *state) rankRevisions() {
	var used uint64 // bit r: revision r is referenced
	for l := 1; l <= int(s.nLease); l++ {
		ls := &s.leases[l]
		used |= 1<<ls.rev | 1<<ls.recMod | 1<<ls.sDel
	}
	for i := range s.cands {
		used |= 1<<s.cands[i].xMod | 1<<s.cands[i].judged
	}
	used &^= 1 // 0: none
	for l := 1; l <= int(s.nLease); l++ {
		ls := &s.leases[l]
		ls.rev, ls.recMod, ls.sDel = rank(used, ls.rev), rank(used, ls.recMod), rank(used, ls.sDel)
	}
	for i := range s.cands {
		c := &s.cands[i]
		c.xMod, c.judged = rank(used, c.xMod), rank(used, c.judged)
	}
	s.rev = uint8(bits.OnesCount64(used)) + 1
}

// rank is revision r's rank among used (0 stays 0: none).
//
//go:norace
func rank(used uint64, r uint8) uint8 {
	if r == 0 {
		return 0
	}
	return uint8(bits.OnesCount64(used&(1<<r-1))) + 1
}
