package model

import "fmt"

// key is the canonical form of a normalized state, for the visited set:
// packed, with no pointers for the collector to scan. Candidates are
// interchangeable (nothing names one by its index), so they are sorted.
type key [3 + maxCands]uint64

// packer packs small fields into a word; word checks that each fit.
type packer struct {
	v, over uint64
	n       uint
}

//go:norace
func (b packer) put(x int, w uint) packer {
	b.over |= uint64(x) >> w
	b.v |= uint64(x) << b.n
	b.n += w
	return b
}

//go:norace
func (b packer) word() uint64 {
	if b.over != 0 || b.n > 64 {
		panic(fmt.Sprintf("model: a field does not fit its width (%d bits)", b.n))
	}
	return b.v
}

//go:norace
func (b packer) flag(f bool) packer {
	x := 0
	if f {
		x = 1
	}
	return b.put(x, 1)
}

// Widths of the packed fields.
const (
	wRev   = 5 // ranks: at most 3*maxGrants+2*maxCands of them
	wRaft  = 2
	wLease = 3
	wCount = 2
	wTime  = 3 // up to maxTTL+mu
)

//go:norace
func (s state) key() key {
	var k key
	h := packer{}.put(int(s.rev), wRev).put(int(s.raft), wRaft).put(int(s.nLease), wLease).
		put(int(s.sweeps), wCount).put(int(s.faults), wCount).put(int(s.hands), wCount)
	for _, c := range s.kids {
		h = h.put(int(c.l), wLease).put(int(c.d), wTime).flag(c.stopping)
	}
	k[0] = h.word()
	var ls [2]packer
	for l := 1; l <= maxGrants; l++ {
		ls[(l-1)/2] = s.leases[l].pack(ls[(l-1)/2])
	}
	k[1], k[2] = ls[0].word(), ls[1].word()
	var cs [maxCands]uint64
	for i := range s.cands {
		cs[i] = s.cands[i].pack()
	}
	sort3(&cs)
	copy(k[3:], cs[:])
	return k
}

//go:norace
func (ls lease) pack(b packer) packer {
	return b.flag(ls.alive).flag(ls.swept).flag(ls.q).flag(ls.s).flag(ls.rec).flag(ls.released).
		put(int(ls.expiry), wTime).put(int(ls.g), wRaft).put(int(ls.sweptAgo), 1).
		put(int(ls.rev), wRev).put(int(ls.recMod), wRev).put(int(ls.recG), wRaft).put(int(ls.sDel), wRev)
}

//go:norace
func (c cand) pack() uint64 {
	return packer{}.put(int(c.proc), 1).put(int(c.phase), 3).put(int(c.l), wLease).put(int(c.d), wTime).
		put(int(c.sub), 2).put(int(c.x), wLease).put(int(c.xMod), wRev).put(int(c.xG), wRaft).put(int(c.until), wTime).
		put(int(c.watch), wLease).flag(c.watchQ).flag(c.woke).put(int(c.pending), maxGrants+1).
		put(int(c.hold), wTime).put(int(c.sitOut), wTime).put(int(c.judged), wRev).put(int(c.own), maxGrants+1).word()
}

//go:norace
func sort3(cs *[maxCands]uint64) {
	if cs[0] > cs[1] {
		cs[0], cs[1] = cs[1], cs[0]
	}
	if cs[1] > cs[2] {
		cs[1], cs[2] = cs[2], cs[1]
	}
	if cs[0] > cs[1] {
		cs[0], cs[1] = cs[1], cs[0]
	}
}

// visited is the search's visited set: every state's key once, with the
// id of the state it was first reached from, by id (the order of first
// visits), in chunks that never move; and an open-addressing hash table of
// ids. It is not a map, whose accesses each call into the race detector
// under -race, and it copies nothing as it grows, which -race makes cost
// in proportion to the size copied: the search runs on one goroutine, and
// -race has nothing to find in it (explore).
type visited struct {
	chunks [][]node
	n      int
	slots  []uint64 // the key's hash's top half, then its id plus one; 0: an empty slot
}

// node is one visited state.
type node struct {
	k      key
	parent int32 // -1 for the initial state
}

const chunk = 1 << 15

func newVisited() *visited { return &visited{slots: make([]uint64, 1<<16)} }

//go:norace
func (v *visited) node(id int32) *node { return &v.chunks[id/chunk][id%chunk] }

// add puts k, reached from parent, in the set unless it is there: it
// returns k's id, and whether k is new.
//
//go:norace
func (v *visited) add(k key, parent int32) (int32, bool) {
	if v.n >= len(v.slots)/2 {
		v.grow()
	}
	h := k.hash()
	tag := h &^ (1<<32 - 1)
	mask := uint64(len(v.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		slot := v.slots[i]
		switch {
		case slot == 0:
			id := int32(v.n)
			if v.n%chunk == 0 {
				v.chunks = append(v.chunks, make([]node, chunk))
			}
			*v.node(id) = node{k, parent}
			v.n++
			v.slots[i] = tag | uint64(id+1)
			return id, true
		case slot&^(1<<32-1) == tag && v.node(int32(slot)-1).k == k:
			return int32(slot) - 1, false
		}
	}
}

//go:norace
func (v *visited) grow() {
	v.slots = make([]uint64, 2*len(v.slots))
	mask := uint64(len(v.slots) - 1)
	for id := range int32(v.n) {
		h := v.node(id).k.hash()
		i := h & mask
		for v.slots[i] != 0 {
			i = (i + 1) & mask
		}
		v.slots[i] = h&^(1<<32-1) | uint64(id+1)
	}
}

//go:norace
func (k *key) hash() uint64 {
	var h uint64
	for _, w := range k {
		h = (h ^ w ^ w>>31) * 0x9e3779b97f4a7c15
		h ^= h >> 32
	}
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>31
}
