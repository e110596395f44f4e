package campaign_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// sweptLine and notSeenLine are what a candidate logs when a replay of the
// election's history holds its start.
const (
	sweptLine   = "since this candidate last looked, and did not say its child was gone"
	notSeenLine = "history since this candidate last looked is not at hand"
)

// replayPair is a candidate D that has had a term, and a moving leader A
// that took over after it.
type replayPair struct {
	*movingLeader
	d   *campaign.Campaigner
	log *testLog // D's
	// dRenewed hears each renewal of D's.
	dRenewed chan struct{}
}

// newReplayPair makes the pair. D's first term leads, renewing, until
// during returns, if given, and ends gracefully before A campaigns.
func newReplayPair(t *testing.T, cluster *etcdtest.Cluster, during func(p *replayPair)) *replayPair {
	t.Helper()
	p := &replayPair{movingLeader: newMovingLeader(t, cluster), log: newTestLog(), dRenewed: make(chan struct{}, 1)}
	p.fa.n = 1 // ids apart
	fd := newFixture(t, p.cli)
	fd.ttl, fd.log = campaign.MinTTL, p.log
	fd.renewed = func(_ time.Duration, err error) {
		if err == nil {
			signal(p.dRenewed)
		}
	}
	p.d = fd.campaigner(false)
	td, err := p.d.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if during != nil {
		held := hold(td)
		during(p)
		td.Revoke()
		awaitErr(t, held)
	}
	td.Revoke()
	p.lead()
	return p
}

// sweep revokes A's lease as a resumed raft leader's sweep would, after a
// raft leader change, and returns when it was sent on the boot clock.
func (p *replayPair) sweep(t *testing.T) time.Duration {
	t.Helper()
	p.move(t)
	return p.revoke(t)
}

// again is D's next campaign, which finds the election empty.
func (p *replayPair) again(t *testing.T) {
	t.Helper()
	td, err := p.d.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(td.Revoke)
}

// The promise at the campaign's level, for a candidate with no term ahead
// to wait on: one that campaigns again after a term of its own (after a
// step-down, when a sweep's deletes empty the election; retrying through
// the etcd election before it) finds nothing in etcd that says a term was
// swept. It replays the sentinels' deletes since it last looked, and
// waits out the swept term's TTL as a waiter behind it would have.
func TestReplayBeforeACampaign(t *testing.T) {
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})

	t.Run("swept-is-waited-out", func(t *testing.T) {
		p := newReplayPair(t, cluster, nil)
		at := p.sweep(t)
		p.again(t)
		// A's child may run until A's deadline: at most A's TTL after the
		// revoke, as every renewal A was credited was sent before it.
		if now := bootclock.Now(); now < at+campaign.MinTTL {
			t.Errorf("D leads %s after A's lease was revoked, before A's TTL of %s had passed:\n%s", now-at, campaign.MinTTL, p.log)
		}
		if !p.log.has(sweptLine) {
			t.Errorf("D did not say it waits out the swept term:\n%s", p.log)
		}
	})

	t.Run("released-is-followed-at-once", func(t *testing.T) {
		p := newReplayPair(t, cluster, nil)
		p.move(t)
		// A learns of the new raft term from a renewal sent after the move,
		// and so says that its child is gone before its revoke.
		awaitSignal(t, p.renewed, "a renewal of A's after the move")
		p.a.Revoke()
		p.again(t)
		if p.log.has(holdLine) {
			t.Errorf("D waited out the graceful end of A:\n%s", p.log)
		}
	})

	// History that etcd compacted may hold a swept term: held for the TTL.
	t.Run("compacted-is-held-for-the-ttl", func(t *testing.T) {
		p := newReplayPair(t, cluster, nil)
		p.a.Revoke()
		compactNow(t, p.cli)
		start := bootclock.Now()
		p.again(t)
		if now := bootclock.Now(); now < start+campaign.MinTTL {
			t.Errorf("D leads %s after it campaigned over a compacted history, before its TTL of %s had passed", now-start, campaign.MinTTL)
		}
		if !p.log.has(notSeenLine) {
			t.Errorf("D did not say it cannot see the history:\n%s", p.log)
		}
	})

	// A leader looks at the election as it leads, so that history compacted
	// during its term costs it nothing when it campaigns again.
	t.Run("a-leader-looks-as-it-leads", func(t *testing.T) {
		p := newReplayPair(t, cluster, func(p *replayPair) {
			compactNow(t, p.cli)
			drain(p.dRenewed)
			awaitSignal(t, p.dRenewed, "a renewal of D's after the compaction")
		})
		p.a.Revoke()
		p.again(t)
		if p.log.has(holdLine) {
			t.Errorf("D held its start although it looked at the election after the compaction:\n%s", p.log)
		}
	})
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func drain(ch chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

func awaitSignal(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(safety):
		t.Fatalf("%s: not within %s", what, safety)
	}
}

// compactNow writes a key outside the election, so that etcd's revision
// is past every one the campaign has seen, and compacts up to it.
func compactNow(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	resp, err := cli.Put(t.Context(), "compact", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(t.Context(), resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
}
