package campaign

import (
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// earlyEnd's rule, case by case: only the delete of a sentinel that records
// a grant before the raft term known now, and does not say released, holds a
// start, for the TTL it records or the waiter's own, whichever is longer;
// a delete whose previous value etcd left out holds it for the waiter's own.
func TestEarlyEndRule(t *testing.T) {
	sentinel := func(v string) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte("p/e.lease/2a"), Value: []byte(v)}
	}
	del := func(prev *mvccpb.KeyValue) *clientv3.Event {
		return &clientv3.Event{Type: clientv3.EventTypeDelete, Kv: &mvccpb.KeyValue{Key: []byte("p/e.lease/2a")}, PrevKv: prev}
	}
	for _, c := range []struct {
		name   string
		ev     *clientv3.Event
		known  int64 // the client's raft term before the event
		header uint64
		want   time.Duration
	}{
		{"after a change", del(sentinel("p/e/2a grant=3/15")), 3, 4, 15 * time.Second},
		{"a change known before", del(sentinel("p/e/2a grant=3/15")), 5, 3, 15 * time.Second},
		{"no change", del(sentinel("p/e/2a grant=3/15")), 3, 3, 0},
		{"released", del(sentinel("p/e/2a grant=3/15 released containment=cgroup")), 3, 4, 0},
		{"no term known at the grant", del(sentinel("p/e/2a grant=0/20 slot=1 holders=2")), 0, 1, 20 * time.Second},
		{"an older etcdlead's sentinel", del(sentinel("p/e/2a")), 3, 4, 0},
		{"no previous value: unknown", del(nil), 3, 3, 10 * time.Second},
		{"a shorter TTL than the waiter's", del(sentinel("p/e/2a grant=3/2")), 3, 4, 10 * time.Second},
		{"a put", &clientv3.Event{Type: clientv3.EventTypePut, Kv: sentinel("p/e/2a grant=3/15"), PrevKv: sentinel("p/e/2a grant=3/15")}, 3, 4, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cp := &Campaigner{renewals: &renewals{}}
			cp.renewals.raftTerm.Store(c.known)
			if got := cp.earlyEnd(c.ev, &pb.ResponseHeader{RaftTerm: c.header}, 10*time.Second); got != c.want {
				t.Errorf("earlyEnd = %s, want %s", got, c.want)
			}
		})
	}
}

// A term that lost its keys after the raft term moved past its grant's sits
// out a TTL before its candidate campaigns again, even with its deadline
// passed: the same sweep may have taken the leader's lease, whose child may
// still run. Without a raft leader change, a passed deadline says the lease
// expired, and it campaigns at once.
func TestEarlyEndSitsOutAfterRaftChange(t *testing.T) {
	now := 100 * time.Second
	for _, c := range []struct {
		name     string
		known    int64
		deadline time.Duration
		want     bool
	}{
		{"deadline passed, raft term moved", 4, now - time.Second, true},
		{"deadline passed, no raft leader change", 3, now - time.Second, false},
		{"deadline ahead, no raft leader change", 3, now + time.Second, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cp := &Campaigner{renewals: &renewals{}, cfg: Config{Now: func() time.Duration { return now }}}
			cp.renewals.raftTerm.Store(c.known)
			tm := &Term{c: cp, TTL: 2 * time.Second, rec: record{grant: grantMark{term: 3, ttl: 2 * time.Second}}}
			tm.dl.Store(int64(c.deadline))
			tm.endedEarly(ErrKeyDeleted)
			if got := cp.sitOutUntil.Load() > 0; got != c.want {
				t.Errorf("sits out: %v, want %v", got, c.want)
			}
		})
	}
}

// A replay waits out each early end from when it was heard, but those up
// to the candidate's own early-ended term from when that end was seen:
// they came before it, and the candidate has sat out a TTL since.
func TestSweptUntil(t *testing.T) {
	s := time.Second
	ends := []sweptEnd{
		{rev: 10, key: "a", heard: 100 * s, early: 2 * s},
		{rev: 12, key: "own-before", heard: 100 * s, early: 0},
		{rev: 14, key: "b", heard: 101 * s, early: 3 * s},
	}
	for _, c := range []struct {
		name      string
		own       int64
		ownAt     time.Duration
		wantUntil time.Duration
		wantKey   string
	}{
		{"no early end of its own", 0, 0, 104 * s, "b"},
		{"both before its own", 14, 90 * s, 93 * s, "b"},
		{"one before its own", 12, 90 * s, 104 * s, "b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := sweptUntil(ends, c.own, c.ownAt)
			if h.until != c.wantUntil || h.key != c.wantKey {
				t.Errorf("sweptUntil = %s for %q, want %s for %q", h.until, h.key, c.wantUntil, c.wantKey)
			}
		})
	}
	if h := sweptUntil([]sweptEnd{{rev: 1, heard: s}}, 0, 0); h.until != 0 {
		t.Errorf("an end that was no early one holds until %s", h.until)
	}
}

// A replay passes over every term of the candidate's own since the last
// replay, not only the one before: a campaign that failed after its grant
// leaves a term between them.
func TestOwnSince(t *testing.T) {
	c := &Campaigner{}
	for _, l := range []clientv3.LeaseID{1, 2, 3} {
		c.noteTerm(l)
	}
	c.noteEarly(2, 7*time.Second)
	tm := &Term{c: c, Lease: 3}
	leases, early, at := tm.ownSince()
	if !slices.Equal(leases, []clientv3.LeaseID{1, 2, 3}) || early != 2 || at != 7*time.Second {
		t.Errorf("ownSince = %v, %d, %s; want [1 2 3], 2, 7s", leases, early, at)
	}
	c.noteTerm(4)
	if leases, early, _ := (&Term{c: c, Lease: 4}).ownSince(); !slices.Equal(leases, []clientv3.LeaseID{3, 4}) || early != 0 {
		t.Errorf("the next replay's ownSince = %v, %d; want [3 4], and no early end among them", leases, early)
	}
	for l := range clientv3.LeaseID(2 * maxOwn) {
		c.noteTerm(l + 10)
	}
	if len(c.own.leases) != maxOwn {
		t.Errorf("%d own leases kept, want at most %d", len(c.own.leases), maxOwn)
	}
}
