package campaign

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func kv(key string, lease int64) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: []byte(key), Lease: lease}
}

func kvValue(key string, lease int64, value string) *mvccpb.KeyValue {
	k := kv(key, lease)
	k.Value = []byte(value)
	return k
}

func mustLayout(t *testing.T, prefix, election string) Layout {
	t.Helper()
	l, err := NewLayout(prefix, election)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A key is a term's only in its exact shape, in its own place, under the
// lease its name gives.
func TestValidKeys(t *testing.T) {
	l := mustLayout(t, "etcdlead/", "x")
	const id = 0x694d8f1c2a3b9e05
	for _, c := range []struct {
		kv                      *mvccpb.KeyValue
		queue, sentinel, record bool
	}{
		{kv(l.QueueKey(id), id), true, false, false},
		{kv(l.SentinelKey(id), id), false, true, false},
		{kv(l.RecordKey(id), 0), false, false, true},
		{kv(l.RecordKey(id), id), false, false, false}, // a record on a lease would go with it
		{kv("etcdlead/x.term/694D8F1C2A3B9E05", 0), false, false, false},
		{kv("etcdlead/x.term/0", 0), false, false, false},
		{kv("etcdlead/x.term/-2a", 0), false, false, false},
		{kv("etcdlead/x/694d8f1c2a3b9e05", id), true, false, false},
		{kv("etcdlead/x/694d8f1c2a3b9e05", id+1), false, false, false}, // another lease
		{kv("etcdlead/x/694d8f1c2a3b9e05", 0), false, false, false},    // no lease
		{kv("etcdlead/x/694D8F1C2A3B9E05", id), false, false, false},   // not canonical
		{kv("etcdlead/x/0694d8f1c2a3b9e05", id), false, false, false},  // leading zero
		{kv("etcdlead/x/zzz", id), false, false, false},                // not hex
		{kv("etcdlead/x/y/694d8f1c2a3b9e05", id), false, false, false}, // a nested election
		{kv("etcdlead/x.lease/y/694d8f1c2a3b9e05", id), false, false, false},
		{kv("etcdlead/x.term/y/694d8f1c2a3b9e05", 0), false, false, false},
		{kv("etcdlead/xx/694d8f1c2a3b9e05", id), false, false, false}, // another election
		{kv("etcdlead/x.resign", id), false, false, false},
		{kv("etcdlead/x/", id), false, false, false},
	} {
		if got := l.ValidQueueKey(c.kv); got != c.queue {
			t.Errorf("ValidQueueKey(%s, lease %x) = %v", c.kv.Key, c.kv.Lease, got)
		}
		if got := l.ValidSentinel(c.kv); got != c.sentinel {
			t.Errorf("ValidSentinel(%s, lease %x) = %v", c.kv.Key, c.kv.Lease, got)
		}
		if got := l.ValidRecord(c.kv); got != c.record {
			t.Errorf("ValidRecord(%s, lease %x) = %v", c.kv.Key, c.kv.Lease, got)
		}
	}
}

// No election's keys lie among another's: not with a prefix inside another
// election, nor with a name that would put its queue among sentinels.
func TestLayoutsDoNotOverlap(t *testing.T) {
	const id = 0x2a
	ls := []Layout{
		mustLayout(t, "etcdlead/", "x"),
		mustLayout(t, "etcdlead/x/", "y"),
		mustLayout(t, "etcdlead/x/", "2a"),
		mustLayout(t, "etcdlead/x.lease/", "2a"),
		mustLayout(t, "etcdlead/x.term/", "2a"),
		mustLayout(t, "etcdlead/", "x.2"),
		mustLayout(t, "etcdlead/", "x-lease"),
	}
	for i, a := range ls {
		for j, b := range ls {
			if i == j {
				continue
			}
			for _, k := range []*mvccpb.KeyValue{kv(b.QueueKey(id), id), kv(b.SentinelKey(id), id), kv(b.RecordKey(id), 0)} {
				if a.ValidQueueKey(k) || a.ValidSentinel(k) || a.ValidRecord(k) {
					t.Errorf("%s's key %s is valid in %s", b.Prefix(), k.Key, a.Prefix())
				}
			}
		}
	}
}

func TestNames(t *testing.T) {
	for _, c := range []struct {
		prefix, want, err string
	}{
		{"etcdlead/", "etcdlead/", ""},
		{"etcdlead", "etcdlead/", ""},
		{"/registry/etcdlead", "/registry/etcdlead/", ""},
		{"a/b/", "a/b/", ""},
		{"", "", "prefix is empty: use e.g. etcdlead/"},
		{"/", "", "empty segment"},
		{"a//b/", "", "empty segment"},
		{"//a", "", "empty segment"},
		{"a b/", "", "whitespace"},
		{"a\tb/", "", "whitespace"},
		{"a\x00/", "", "unprintable"},
	} {
		got, err := NormalPrefix(c.prefix)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("NormalPrefix(%q) = %q, %v; want %q, %q", c.prefix, got, err, c.want, c.err)
		}
	}
	for name, want := range map[string]string{
		"reports": "", "nightly.report": "", "x-lease": "", "lease": "", ".lease": "reserves",
		"x.lease":  `election name "x.lease" ends in ".lease", which etcdlead reserves for its own keys: use e.g. x-lease`,
		"x.resign": "reserves", "x.slot": "reserves", "x.term": "reserves", "a/b": "may not contain '/'", "a b": "spaces",
		"a\x01b": "unprintable", "a\xffb": "unprintable", "": "is empty",
	} {
		err := CheckElection(name)
		if (err == nil) != (want == "") || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckElection(%q) = %v, want %q", name, err, want)
		}
	}
	for id, want := range map[string]string{
		"20261205T1000": "", "nightly:2026-12-05": "", strings.Repeat("x", MaxRunIDLen): "",
		strings.Repeat("x", MaxRunIDLen+1): "bytes long", "a/b": "'/'", "a b": "whitespace", "a\u00a0b": "whitespace",
		"a\x1b[2J": "unprintable", "a\xff": "unprintable", "": `run id is empty: use e.g. "$(date -u +%Y%m%dT%H%M)"`,
	} {
		err := CheckRunID(id)
		if (err == nil) != (want == "") || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckRunID(%.20q) = %v, want %q", id, err, want)
		}
	}
	for id, want := range map[string]string{
		"web-1/4121": "", "a b": "", strings.Repeat("x", MaxIDLen): "",
		strings.Repeat("x", MaxIDLen+1): "bytes long", "a\nMAINPID=1": "unprintable", "a\x1b[2J": "unprintable",
		"a\xff": "unprintable", "": "empty",
	} {
		err := CheckID(id)
		if (err == nil) != (want == "") || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckID(%.20q) = %v, want %q", id, err, want)
		}
	}
}

// A refused key names its election, whichever of its keys it was.
func TestSplitKey(t *testing.T) {
	l := mustLayout(t, "etcdlead/", "reports")
	for _, key := range []string{l.QueueKey(0x2a), l.SentinelKey(0x2a), l.RecordKey(0x2a), l.QueuePrefix(), l.SentinelPrefix(), l.RecordPrefix(), l.ResignKey(),
		l.SlotKey(1), l.SlotPrefix(), l.PauseKey()} {
		got, ok := SplitKey(key)
		if !ok || got != l {
			t.Errorf("SplitKey(%q) = %+v, %v; want %+v", key, got, ok, l)
		}
	}
	if _, ok := SplitKey("nokey"); ok {
		t.Error("SplitKey of a key with no '/' found an election")
	}
}

// Grouping everything under a prefix: valid keys by election and in create
// order, foreign keys counted, sentinels not taken for an election of their
// own, resign keys and run records left out, health verdicts by lease
// (only those on their own term's lease).
func TestElections(t *testing.T) {
	x := mustLayout(t, "p/", "x")
	y := mustLayout(t, "p/", "y")
	at := func(k *mvccpb.KeyValue, rev int64) *mvccpb.KeyValue { k.CreateRevision = rev; return k }
	kvs := []*mvccpb.KeyValue{
		at(kv(x.QueueKey(7), 7), 2),
		at(kv(x.SentinelKey(7), 7), 2),
		at(kv("p/x/zzz", 0), 3),
		at(kv(y.SentinelKey(9), 9), 4),
		at(kv(x.ResignKey(), 0), 5),
		at(kv(x.QueueKey(5), 5), 6),
		at(kv(x.SentinelKey(5), 5), 6),
		at(kv("p/x.lease/zz", 5), 7),
		at(kv("p/x.resign/1", 1), 8),
		at(kv(x.RunKey("20261205", 0), 3), 9),
		at(kvValue(x.HealthKey(7), 7, `{"status":"healthy"}`), 10),
		at(kvValue(x.HealthKey(5), 9, `{"status":"unhealthy"}`), 11),
		at(kv(x.RecordKey(7), 0), 2),
		at(kv(y.RecordKey(3), 0), 1),
		at(kv("p/x.term/zz", 0), 12),
	}
	els := Elections("p/", kvs)
	if len(els) != 2 || els[0].Name != "x" || els[1].Name != "y" {
		t.Fatalf("elections %+v, want x and y", els)
	}
	ex, ey := els[0], els[1]
	if l := ex.Leader(); l == nil || clientv3.LeaseID(l.Lease) != 7 || len(ex.Queue) != 2 || ex.Skipped != 3 || ex.Older() != 0 || len(ex.Records) != 1 {
		t.Errorf("x: leader %v, queue %d, skipped %d, older %d", ex.Leader(), len(ex.Queue), ex.Skipped, ex.Older())
	}
	if h := ex.Health; len(h) != 1 || h[7].Status != "healthy" {
		t.Errorf("x: health %v, want the leader's, healthy", h)
	}
	// y: one term whose lease lives (its sentinel), one that ended with
	// its record left.
	if ey.Leader() != nil || ey.Older() != 2 || ey.Skipped != 0 {
		t.Errorf("y: leader %v, older %d, skipped %d; want none, 2, 0", ey.Leader(), ey.Older(), ey.Skipped)
	}
}

// A caller words the refusal in its own names for the fields; the
// suggestion follows them.
func TestNameErrorFormat(t *testing.T) {
	flag := func(f NameField) string {
		return map[NameField]string{FieldPrefix: "--prefix", FieldElection: "--election", FieldID: "--id"}[f]
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{func() error { _, err := NormalPrefix(""); return err }(), "--prefix is empty: use e.g. --prefix etcdlead/"},
		{func() error { _, err := NormalPrefix("a//b"); return err }(), `--prefix "a//b/" has an empty segment: use e.g. --prefix etcdlead/`},
		{CheckElection("a/b"), `--election "a/b" may not contain '/' or spaces: use e.g. --election a-b`},
		{CheckElection("x.resign"), `--election "x.resign" ends in ".resign", which etcdlead reserves for its own keys: use e.g. --election x-resign`},
		{CheckID("a\nb"), `--id "a\nb" has unprintable characters: use one line of printable characters`},
		{CheckID(strings.Repeat("x", MaxIDLen+1)), fmt.Sprintf("--id is %d bytes long: use at most %d", MaxIDLen+1, MaxIDLen)},
	} {
		var ne *NameError
		if !errors.As(c.err, &ne) {
			t.Errorf("%v is no NameError", c.err)
			continue
		}
		if got := ne.Format(flag); got != c.want {
			t.Errorf("Format = %q, want %q", got, c.want)
		}
	}
}

// A sentinel's value records N only when N > 1, and reads back as N; a
// value without it is one holder's, one with a number etcdlead never
// writes is 0 (no agreement possible).
func TestSentinelValue(t *testing.T) {
	for _, slot := range []int{-1, 0} {
		if v := SentinelValue("p/e/2a", 1, slot); v != "p/e/2a" {
			t.Errorf("one holder's sentinel value %q, want the queue key alone", v)
		}
	}
	for _, n := range []int{2, 3, MaxHolders} {
		if got := HoldersOf([]byte(SentinelValue("p/e/2a", n, -1))); got != n {
			t.Errorf("HoldersOf(SentinelValue(_, %d, -1)) = %d", n, got)
		}
	}
	for value, want := range map[string]int{"p/e/2a": 1, "": 1, "p/e/2a holders=1": 0, "p/e/2a holders=02": 0,
		"p/e/2a holders=x": 0, "p/e/2a holders=-3": 0, "p/e/2a slot=1 holders=2": 2, "p/e/2a holders=2 slot=1": 0} {
		if got := HoldersOf([]byte(value)); got != want {
			t.Errorf("HoldersOf(%q) = %d, want %d", value, got, want)
		}
	}
}

// A slot goes before the number of holders in a sentinel, so that an
// etcdlead that parses only the number (everything after " holders=")
// still reads it.
func TestSentinelSlot(t *testing.T) {
	for _, c := range []struct{ n, slot int }{{2, 0}, {2, 1}, {3, 2}, {MaxHolders, MaxHolders - 1}} {
		v := SentinelValue("p/e/2a", c.n, c.slot)
		if want := fmt.Sprintf("p/e/2a slot=%d holders=%d", c.slot, c.n); v != want {
			t.Errorf("SentinelValue(_, %d, %d) = %q, want %q", c.n, c.slot, v, want)
		}
		if _, n, _ := strings.Cut(v, " holders="); n != strconv.Itoa(c.n) {
			t.Errorf("%q: the number after \" holders=\" is %q, want %d", v, n, c.n)
		}
		if got := HoldersOf([]byte(v)); got != c.n {
			t.Errorf("HoldersOf(%q) = %d, want %d", v, got, c.n)
		}
	}
}

// A record round-trips, and a value etcdlead did not write is no record it
// can read: its term's TTL is then unknown.
func TestTermRecord(t *testing.T) {
	one := 1
	for _, r := range []TermRecord{{Key: "p/e/2a", TTL: 15, RaftTerm: 7}, {Key: "p/e/2a", TTL: 2, Containment: "cgroup"},
		{Key: "p/e/2a", TTL: 3600, RaftTerm: 12, Holders: 3, Slot: &one, Containment: "process-group"}} {
		got, ok := ParseRecord([]byte(r.value()))
		if !ok || got.Key != r.Key || got.TTL != r.TTL || got.RaftTerm != r.RaftTerm || got.Holders != r.Holders ||
			(got.Slot == nil) != (r.Slot == nil) || got.Slot != nil && *got.Slot != *r.Slot || got.Containment != r.Containment {
			t.Errorf("ParseRecord(%s) = %+v, %v", r.value(), got, ok)
		}
	}
	for _, v := range []string{"", "p/e/2a", "{}", `{"key":"p/e/2a"}`, `{"key":"p/e/2a","ttl":0}`, `{"key":"p/e/2a","ttl":-1}`,
		`{"key":"p/e/2a","ttl":3601}`, `{"ttl":15}`, `{"key":"p/e/2a","ttl":"15"}`} {
		if got, ok := ParseRecord([]byte(v)); ok {
			t.Errorf("ParseRecord(%q) = %+v, want none", v, got)
		}
	}
}
