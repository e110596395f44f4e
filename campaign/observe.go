package campaign

import (
	"context"
	"sort"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Election is one election as a read of its keys shows it, for observers
// (etcdlead status and resign). Only valid keys count: a key put by hand,
// by another program or by a nested election is skipped, never taken for
// a candidate, and never hides one.
type Election struct {
	Name   string
	Layout Layout
	// Queue holds the valid queue keys by create revision: the first leads.
	Queue []*mvccpb.KeyValue
	// Sentinels holds the valid sentinels by create revision: one per term
	// whose lease lives, queued or not.
	Sentinels []*mvccpb.KeyValue
	// Records holds the valid term records by create revision: one per
	// term whose child may run, whose lease lives or ended without its
	// term or a successor taking the record away yet.
	Records []*mvccpb.KeyValue
	// Skipped counts the other keys under the queue, sentinel and record
	// prefixes.
	Skipped int
	// Pause is the election's pause key, nil when it is not paused.
	Pause *mvccpb.KeyValue
	// Health holds the terms' health verdicts, by lease.
	Health map[int64]HealthRecord
}

// Leader is the first valid queue key, or nil.
func (e *Election) Leader() *mvccpb.KeyValue {
	if len(e.Queue) == 0 {
		return nil
	}
	return e.Queue[0]
}

// Older counts the terms below the leader's with no queue key left: their
// lease still lives (the key deleted by hand, or the term stopping), or
// it ended and their record is still there (docs/design.md, "The term
// record"). The leader waits for them before it starts its child.
func (e *Election) Older() int {
	l := e.Leader()
	terms := map[int64]bool{}
	for _, s := range e.Sentinels {
		if l == nil || s.CreateRevision < l.CreateRevision {
			terms[s.Lease] = true
		}
	}
	for _, r := range e.Records {
		if id, ok := e.Layout.RecordLease(r); ok && (l == nil || r.CreateRevision < l.CreateRevision) {
			terms[int64(id)] = true
		}
	}
	return len(terms)
}

// RecordOf is the record of the term with lease id, or nil.
func (e *Election) RecordOf(id int64) *mvccpb.KeyValue {
	for _, r := range e.Records {
		if lease, ok := e.Layout.RecordLease(r); ok && int64(lease) == id {
			return r
		}
	}
	return nil
}

// Holders is the number of holders the election's terms were started with
// (docs/design.md, "More than one holder"): that of its oldest live term,
// whose rule the others had to agree with; 1 when no term is live.
func (e *Election) Holders() int {
	if len(e.Sentinels) == 0 {
		return 1
	}
	return max(1, HoldersOf(e.Sentinels[0].Value))
}

func (e *Election) add(kv *mvccpb.KeyValue) {
	switch {
	case string(kv.Key) == e.Layout.PauseKey():
		e.Pause = kv
		return
	case strings.HasPrefix(string(kv.Key), e.Layout.HealthPrefix()):
		if rec, ok := ParseHealth(kv.Value); ok && validUnder(e.Layout.HealthPrefix(), kv) {
			if e.Health == nil {
				e.Health = map[int64]HealthRecord{}
			}
			e.Health[kv.Lease] = rec
		}
		return
	case strings.HasPrefix(string(kv.Key), e.Layout.SentinelPrefix()):
		if e.Layout.ValidSentinel(kv) {
			e.Sentinels = append(e.Sentinels, kv)
			return
		}
	case strings.HasPrefix(string(kv.Key), e.Layout.RecordPrefix()):
		if e.Layout.ValidRecord(kv) {
			e.Records = append(e.Records, kv)
			return
		}
	case e.Layout.ValidQueueKey(kv):
		e.Queue = append(e.Queue, kv)
		return
	}
	e.Skipped++
}

func (e *Election) sort() {
	for _, kvs := range [][]*mvccpb.KeyValue{e.Queue, e.Sentinels, e.Records} {
		sort.SliceStable(kvs, func(i, j int) bool { return kvs[i].CreateRevision < kvs[j].CreateRevision })
	}
}

// ReadElection reads one election's queue, sentinels, records and pause in one
// read-only transaction, and returns them with the read's revision. The
// health verdicts are read after it, at the same revision, and left out
// when the role may not read them: they are only shown.
func ReadElection(ctx context.Context, cli *clientv3.Client, l Layout) (Election, int64, error) {
	all := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)}
	resp, err := cli.Txn(ctx).Then(clientv3.OpGet(l.QueuePrefix(), all...), clientv3.OpGet(l.SentinelPrefix(), all...),
		clientv3.OpGet(l.RecordPrefix(), all...), clientv3.OpGet(l.PauseKey())).Commit()
	if err != nil {
		return Election{}, 0, err
	}
	e := Election{Name: l.name, Layout: l}
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			e.add(kv)
		}
	}
	rev := resp.Header.Revision
	health, err := cli.Get(ctx, l.HealthPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev))
	switch {
	case err == nil:
		for _, kv := range health.Kvs {
			e.add(kv)
		}
	case !Permanent(err):
		return Election{}, 0, err
	}
	e.sort()
	return e, rev, nil
}

// Elections sorts the keys of a read of everything under prefix (already
// checked with NormalPrefix) into the elections they belong to, in order
// of their first key. Keys that belong to no election name (resign
// requests, keys in reserved or malformed places) are left out.
func Elections(prefix string, kvs []*mvccpb.KeyValue) []Election {
	var out []Election
	index := map[string]int{}
	for _, kv := range kvs {
		rest, ok := strings.CutPrefix(string(kv.Key), prefix)
		if !ok {
			continue
		}
		name, _, ok := strings.Cut(rest, "/")
		if !ok {
			// An election's own key outside its prefixes: only the pause
			// is shown.
			if name, ok = strings.CutSuffix(rest, pauseSuffix); !ok {
				continue
			}
		}
		for _, suffix := range []string{healthSuffix, sentinelSuffix, recordSuffix} {
			if n, ok := strings.CutSuffix(name, suffix); ok {
				name = n
				break
			}
		}
		if CheckElection(name) != nil {
			continue
		}
		i, seen := index[name]
		if !seen {
			i = len(out)
			index[name] = i
			out = append(out, Election{Name: name, Layout: Layout{p: prefix + name, name: name}})
		}
		out[i].add(kv)
	}
	for i := range out {
		out[i].sort()
	}
	return out
}

// ReadElections reads every election under prefix (checked with
// NormalPrefix) in one request: see Elections.
func ReadElections(ctx context.Context, cli *clientv3.Client, prefix string) ([]Election, error) {
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	return Elections(prefix, resp.Kvs), nil
}

// ReadSlots maps the leases of the election's slot keys to their slots,
// and the leases of the terms whose slot key is gone (deleted by hand, or
// with an ended lease) to the slot their record names: a holder's slot
// until its record goes (docs/design.md, "More than one holder"). With one
// holder it is empty.
func (e *Election) ReadSlots(ctx context.Context, cli *clientv3.Client) (map[int64]int, error) {
	out := map[int64]int{}
	holders := e.Holders()
	if holders <= 1 {
		return out, nil
	}
	l := e.Layout
	resp, err := cli.Get(ctx, l.SlotPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	for i := range holders {
		for _, kv := range resp.Kvs {
			if string(kv.Key) == l.SlotKey(i) && kv.Lease != 0 {
				out[kv.Lease] = i
			}
		}
	}
	for _, kv := range e.Records {
		rec, ok := ParseRecord(kv.Value)
		id, _ := e.Layout.RecordLease(kv)
		if ok && rec.Slot != nil && *rec.Slot >= 0 && *rec.Slot < holders {
			if _, keyed := out[int64(id)]; !keyed {
				out[int64(id)] = *rec.Slot
			}
		}
	}
	return out, nil
}

// Watch watches what ReadElection reads, the queue, the sentinels, the
// records, the pause and the health verdicts, from revision from on, under ctx. One
// watch per key or prefix rather than one range over all: a role that
// covers an election grants exactly these (docs/security.md, "Running
// against a secured etcd"). Watches made with one context share one stream. A
// role that may not read the health verdicts ends that watch alone, with
// an error its reader skips.
func (l Layout) Watch(ctx context.Context, cli *clientv3.Client, from int64) []clientv3.WatchChan {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(from)}
	return []clientv3.WatchChan{cli.Watch(ctx, l.QueuePrefix(), opts...), cli.Watch(ctx, l.SentinelPrefix(), opts...),
		cli.Watch(ctx, l.RecordPrefix(), opts...), cli.Watch(ctx, l.PauseKey(), clientv3.WithRev(from)), cli.Watch(ctx, l.HealthPrefix(), opts...)}
}
