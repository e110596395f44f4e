package campaign

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The key layout of one election (docs/design.md, "Keys"). With the
// election prefix P = <prefix><election>:
//
//	P/<lease hex>          queue key, value = the candidate's id (etcd's
//	                       concurrency.Election layout, so etcdctl elect -l
//	                       and Election.Leader see the same leader)
//	P.lease/<lease hex>    the term's lease sentinel, value = its queue key,
//	                       and with N > 1 holders " slot=<i>" once it took
//	                       slot i and " holders=<N>" (SentinelValue)
//	P.term/<lease hex>     the term's record, on no lease: it outlives the
//	                       lease until the term's child is known gone
//	                       (TermRecord)
//	P.resign               the resign request, value = the queue key asked
//	P.slot/<i>             with more than one holder, the slot i (0...N-1)
//	                       a holding term took, value = its queue key
//	P.pause                the election's pause (etcdlead pause), value =
//	                       who paused, when and why (PauseRecord)
//	P.run/<id>/<i>         run id's record in slot i (0 with one holder),
//	                       value = who ran it (RunRecord)
//	P.health/<lease hex>   the verdict of the term's health check, written
//	                       when it changes (HealthRecord)
//
// Every key of a term but its record is attached to the term's lease and
// named by it, so it goes exactly when the lease ends; the record goes
// only when its term, or a successor, knows the child gone. The resign
// request and the pause belong to no term, and a run's record to a lease
// of its own. The election names reserved below keep one election's keys
// out of every other's.
const (
	sentinelSuffix = ".lease"
	recordSuffix   = ".term"
	resignSuffix   = ".resign"
	slotSuffix     = ".slot"
	pauseSuffix    = ".pause"
	runSuffix      = ".run"
	healthSuffix   = ".health"

	// MaxIDLen bounds --id, which is stored in every queue key and given
	// to the child and to systemd: etcd refuses requests over its own
	// limit only after a campaign has begun.
	MaxIDLen = 256
)

var reservedSuffixes = []string{sentinelSuffix, recordSuffix, resignSuffix, slotSuffix, pauseSuffix, runSuffix, healthSuffix}

// Layout names the keys of one election.
type Layout struct {
	p    string // the election prefix P, without a trailing slash
	name string // the election's name, P's last segment
}

// NewLayout checks prefix and election and returns their layout. prefix is
// normalised to end in '/'.
func NewLayout(prefix, election string) (Layout, error) {
	prefix, err := NormalPrefix(prefix)
	if err != nil {
		return Layout{}, err
	}
	if err := CheckElection(election); err != nil {
		return Layout{}, err
	}
	return Layout{p: prefix + election, name: election}, nil
}

// Name is the election's name.
func (l Layout) Name() string { return l.name }

// Prefix is the election prefix P (no trailing slash), which etcdctl elect
// and concurrency.NewElection take as the election's name.
func (l Layout) Prefix() string { return l.p }

// QueuePrefix holds the candidates' queue keys.
func (l Layout) QueuePrefix() string { return l.p + "/" }

// SentinelPrefix holds the terms' lease sentinels.
func (l Layout) SentinelPrefix() string { return l.p + sentinelSuffix + "/" }

// RecordPrefix holds the terms' records.
func (l Layout) RecordPrefix() string { return l.p + recordSuffix + "/" }

// ResignKey is where etcdlead resign asks a leader to step down.
func (l Layout) ResignKey() string { return l.p + resignSuffix }

// PauseKey is where etcdlead pause pauses the election.
func (l Layout) PauseKey() string { return l.p + pauseSuffix }

// SlotPrefix holds the slots of an election with more than one holder.
func (l Layout) SlotPrefix() string { return l.p + slotSuffix + "/" }

// SlotKey is slot i's key.
func (l Layout) SlotKey(i int) string { return l.SlotPrefix() + strconv.Itoa(i) }

// RunsPrefix holds the records of every run id.
func (l Layout) RunsPrefix() string { return l.p + runSuffix + "/" }

// RunPrefix holds the records of run id's slots.
func (l Layout) RunPrefix(id string) string { return l.RunsPrefix() + id + "/" }

// RunKey is the record of run id in slot i.
func (l Layout) RunKey(id string, slot int) string { return l.RunPrefix(id) + strconv.Itoa(slot) }

// HealthPrefix holds the terms' health verdicts.
func (l Layout) HealthPrefix() string { return l.p + healthSuffix + "/" }

// HealthKey is the health verdict of the term with lease id.
func (l Layout) HealthKey(id clientv3.LeaseID) string { return l.HealthPrefix() + leaseHex(id) }

// SentinelValue is what a term's sentinel holds: its queue key and, when
// the election has more than one holder, their number, so that every
// candidate of one election can check that all agree on it, and, once the
// term took a slot (slot >= 0), the slot, so that a deleted slot key does
// not free it while the lease lives (docs/design.md, "More than one
// holder"). The slot comes before the number: an etcdlead that reads only
// the number takes what follows holdersSep. With one holder the value is
// the queue key alone, as it always was.
func SentinelValue(key string, holders, slot int) string {
	if holders <= 1 {
		return key
	}
	if slot >= 0 {
		key += slotSep + strconv.Itoa(slot)
	}
	return key + holdersSep + strconv.Itoa(holders)
}

// holdersSep and slotSep cannot occur in a queue key: a prefix has no
// whitespace.
const (
	holdersSep = " holders="
	slotSep    = " slot="
)

// HoldersOf is the number of holders a sentinel's value records: 1 when it
// records none (a term of one holder, or of an etcdlead from before
// holders), 0 when the number is not one etcdlead writes.
func HoldersOf(value []byte) int {
	_, n, ok := strings.Cut(string(value), holdersSep)
	if !ok {
		return 1
	}
	h, err := strconv.Atoi(n)
	if err != nil || h < 2 || strconv.Itoa(h) != n {
		return 0
	}
	return h
}

// slotIndex reads s as one of n slots, written as etcdlead writes it.
func slotIndex(s string, n int) (int, bool) {
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i >= n || strconv.Itoa(i) != s {
		return 0, false
	}
	return i, true
}

// QueueKey is the queue key of the term with lease id.
func (l Layout) QueueKey(id clientv3.LeaseID) string { return l.QueuePrefix() + leaseHex(id) }

// SentinelKey is the sentinel of the term with lease id.
func (l Layout) SentinelKey(id clientv3.LeaseID) string { return l.SentinelPrefix() + leaseHex(id) }

// RecordKey is the record of the term with lease id.
func (l Layout) RecordKey(id clientv3.LeaseID) string { return l.RecordPrefix() + leaseHex(id) }

func leaseHex(id clientv3.LeaseID) string { return strconv.FormatInt(int64(id), 16) }

// validUnder reports whether kv is a key of a term in exactly the shape
// prefix<lease hex>: one segment, the lease's canonical hex, and attached
// to that very lease. Anything else under the prefix (a key put by hand or
// by another program, a nested election's keys) belongs to no term.
func validUnder(prefix string, kv *mvccpb.KeyValue) bool {
	name, ok := strings.CutPrefix(string(kv.Key), prefix)
	if !ok || kv.Lease <= 0 {
		return false
	}
	return name == leaseHex(clientv3.LeaseID(kv.Lease))
}

// ValidQueueKey reports whether kv is a candidate of this election.
func (l Layout) ValidQueueKey(kv *mvccpb.KeyValue) bool { return validUnder(l.QueuePrefix(), kv) }

// ValidSentinel reports whether kv is a term's sentinel in this election.
func (l Layout) ValidSentinel(kv *mvccpb.KeyValue) bool { return validUnder(l.SentinelPrefix(), kv) }

// RecordLease is the lease of the term whose record kv is, if kv is a
// valid record of this election: exactly P.term/<lease hex>, the canonical
// hex of a lease id, on no lease. A record on a lease would go with it,
// which is what a record must not do: it is no record.
func (l Layout) RecordLease(kv *mvccpb.KeyValue) (clientv3.LeaseID, bool) {
	name, ok := strings.CutPrefix(string(kv.Key), l.RecordPrefix())
	if !ok || kv.Lease != 0 {
		return 0, false
	}
	id, err := strconv.ParseInt(name, 16, 64)
	if err != nil || id <= 0 || leaseHex(clientv3.LeaseID(id)) != name {
		return 0, false
	}
	return clientv3.LeaseID(id), true
}

// ValidRecord reports whether kv is a term's record in this election.
func (l Layout) ValidRecord(kv *mvccpb.KeyValue) bool {
	_, ok := l.RecordLease(kv)
	return ok
}

// NormalPrefix checks a key prefix and returns it ending in '/'. A prefix
// is a path of non-empty segments; a leading '/' is allowed, as many etcd
// key spaces start with one.
func NormalPrefix(prefix string) (string, error) {
	if prefix == "" {
		return "", &NameError{Field: FieldPrefix, Problem: "is empty", Example: "etcdlead/"}
	}
	for _, r := range prefix {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == unicode.ReplacementChar {
			return "", &NameError{Field: FieldPrefix, Value: prefix, Problem: "has whitespace or unprintable characters", Example: "etcdlead/"}
		}
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if rest := strings.TrimPrefix(prefix, "/"); rest == "" || strings.HasPrefix(rest, "/") || strings.Contains(rest, "//") {
		return "", &NameError{Field: FieldPrefix, Value: prefix, Problem: "has an empty segment", Example: "etcdlead/"}
	}
	return prefix, nil
}

// CheckElection checks an election name: one printable segment that does
// not end in a suffix the layout reserves for its own keys.
func CheckElection(name string) error {
	if name == "" {
		return &NameError{Field: FieldElection, Problem: "is empty", Example: "NAME"}
	}
	if strings.ContainsAny(name, "/ \t\n\r") {
		return &NameError{Field: FieldElection, Value: name, Problem: "may not contain '/' or spaces",
			Example: strings.NewReplacer("/", "-", " ", "-", "\t", "-", "\n", "-", "\r", "-").Replace(name)}
	}
	for _, r := range name {
		if !unicode.IsPrint(r) || r == unicode.ReplacementChar {
			return &NameError{Field: FieldElection, Value: name, Problem: "has unprintable characters", Fix: "use letters, digits, '.', '-' or '_'"}
		}
	}
	for _, s := range reservedSuffixes {
		if strings.HasSuffix(name, s) {
			return &NameError{Field: FieldElection, Value: name,
				Problem: fmt.Sprintf("ends in %q, which etcdlead reserves for its own keys", s),
				Example: strings.TrimSuffix(name, s) + "-" + s[1:]}
		}
	}
	return nil
}

// CheckID checks a candidate's id: one printable line of at most MaxIDLen
// bytes.
func CheckID(id string) error {
	if id == "" {
		return &NameError{Field: FieldID, Problem: "is empty", Fix: "give a name"}
	}
	if len(id) > MaxIDLen {
		return &NameError{Field: FieldID, Problem: fmt.Sprintf("is %d bytes long", len(id)), Fix: fmt.Sprintf("use at most %d", MaxIDLen)}
	}
	for _, r := range id {
		if !unicode.IsPrint(r) || r == unicode.ReplacementChar {
			return &NameError{Field: FieldID, Value: id, Problem: "has unprintable characters", Fix: "use one line of printable characters"}
		}
	}
	return nil
}

// NameField is a name that NormalPrefix, CheckElection or CheckID checks.
type NameField int

const (
	FieldPrefix NameField = iota + 1
	FieldElection
	FieldID
	FieldRunID
)

func (f NameField) String() string {
	switch f {
	case FieldPrefix:
		return "prefix"
	case FieldElection:
		return "election name"
	case FieldID:
		return "id"
	case FieldRunID:
		return "run id"
	}
	return fmt.Sprintf("NameField(%d)", int(f))
}

// NameError is a refused prefix, election name or id, in parts, so that a
// caller can name the field in its own words (Format).
type NameError struct {
	Field   NameField
	Value   string // the value refused, "" when not worth showing
	Problem string // what is wrong, e.g. "has an empty segment"
	Example string // a value to suggest, or ""
	Fix     string // what to do when there is no example
}

func (e *NameError) Error() string { return e.words(e.Field.String(), "") }

// Format words the error with name(field) for the field, such as a flag,
// which the suggestion then repeats: "--prefix is empty: use e.g. --prefix
// etcdlead/".
func (e *NameError) Format(name func(NameField) string) string {
	n := name(e.Field)
	return e.words(n, n+" ")
}

func (e *NameError) words(subject, use string) string {
	msg := subject
	if e.Value != "" {
		msg += " " + strconv.Quote(e.Value)
	}
	msg += " " + e.Problem
	switch {
	case e.Example != "":
		msg += ": use e.g. " + use + e.Example
	case e.Fix != "":
		msg += ": " + e.Fix
	}
	return msg
}

// SplitKey finds the election a key of etcdlead's layout belongs to, for
// messages about it (a permission refused on it, say): the election prefix
// P of a queue key, a sentinel, a record, their prefixes, the resign key or
// the pause. (Every transaction of a term names its queue key first.)
func SplitKey(key string) (Layout, bool) {
	for _, suffix := range []string{resignSuffix, pauseSuffix} {
		if p, ok := strings.CutSuffix(key, suffix); ok && p != "" {
			return layoutOf(p), true
		}
	}
	i := strings.LastIndex(key, "/")
	if i <= 0 {
		return Layout{}, false
	}
	p := key[:i]
	for _, suffix := range []string{sentinelSuffix, recordSuffix, slotSuffix, healthSuffix} {
		if q, ok := strings.CutSuffix(p, suffix); ok {
			p = q
			break
		}
	}
	return layoutOf(p), p != ""
}

// layoutOf is the layout of election prefix p, as found in a key.
func layoutOf(p string) Layout {
	return Layout{p: p, name: p[strings.LastIndex(p, "/")+1:]}
}
