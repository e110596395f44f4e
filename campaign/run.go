package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A run id names one firing of a job (Config.RunID): the term that may
// start its child records the id, in slot i, at P.run/<id>/<i> before the
// child starts, with a transaction that succeeds only while the key is
// absent and the term's own keys are intact, and attached to a lease of
// its own (Config.RunTTL) that nothing renews (docs/design.md, "Once per
// firing"). So per slot, at most one child runs per id for as long as the
// record lives, whichever candidate wins and whenever: the recorded id,
// not the timing of the candidates' starts, decides.

// ErrRunDone refuses a campaign whose run id is recorded already: every
// slot of the election ran that firing (with one holder: it ran).
var ErrRunDone = errors.New("run already recorded")

// MaxRunIDLen bounds a run id, which is one segment of a key.
const MaxRunIDLen = 128

// RunRecord is the value of a run key: which candidate ran the firing, in
// which term, and when it recorded it.
type RunRecord struct {
	By  string    `json:"by"`
	Key string    `json:"key"`
	At  time.Time `json:"at"`
}

// CheckRunID checks a run id: one key segment of printable characters, no
// '/' and no whitespace, at most MaxRunIDLen bytes.
func CheckRunID(id string) error {
	switch {
	case id == "":
		return &NameError{Field: FieldRunID, Problem: "is empty", Example: `"$(date -u +%Y%m%dT%H%M)"`}
	case len(id) > MaxRunIDLen:
		return &NameError{Field: FieldRunID, Problem: fmt.Sprintf("is %d bytes long", len(id)), Fix: fmt.Sprintf("use at most %d", MaxRunIDLen)}
	}
	for _, r := range id {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '/' || r == unicode.ReplacementChar {
			return &NameError{Field: FieldRunID, Value: id, Problem: "has '/', whitespace or unprintable characters",
				Fix: "use letters, digits, '.', '-', ':' or '_'"}
		}
	}
	return nil
}

// runDone is the error for a run id found recorded at revision rev.
func runDone(id string, rev int64) error {
	return fmt.Errorf("%w: run id %q (at revision %d)", ErrRunDone, id, rev)
}

// readRun is the read of the run's records that the transactions deciding
// a start (enqueue, the start read) carry, or nil without a run id.
func (c *Campaigner) readRun() []clientv3.Op {
	if c.cfg.RunID == "" {
		return nil
	}
	return []clientv3.Op{clientv3.OpGet(c.cfg.Layout.RunPrefix(c.cfg.RunID), clientv3.WithPrefix(), clientv3.WithKeysOnly())}
}

// checkRun refuses a start once every slot holds a record of the run id:
// kvs is readRun's answer. A key under the prefix that names no slot of
// this election is no record.
func (c *Campaigner) checkRun(kvs []*mvccpb.KeyValue) error {
	if len(c.ranSlots(kvs)) < c.holders() {
		return nil
	}
	last := int64(0)
	for _, kv := range kvs {
		last = max(last, kv.ModRevision)
	}
	return runDone(c.cfg.RunID, last)
}

// ranSlots are the slots that kvs, readRun's answer, record.
func (c *Campaigner) ranSlots(kvs []*mvccpb.KeyValue) map[int]bool {
	prefix := c.cfg.Layout.RunPrefix(c.cfg.RunID)
	ran := map[int]bool{}
	for _, kv := range kvs {
		s, ok := strings.CutPrefix(string(kv.Key), prefix)
		if i, valid := slotIndex(s, c.holders()); ok && valid {
			ran[i] = true
		}
	}
	return ran
}

// recordRun records the run id in the term's slot before its child
// starts: created only if absent, and only while the term's own keys are
// intact, attached to a fresh lease of Config.RunTTL. The record is the
// run's decision: ErrRunDone when another term recorded it first.
func (t *Term) recordRun(ctx context.Context) error {
	c := t.c
	if c.cfg.RunID == "" {
		return nil
	}
	key := c.cfg.Layout.RunKey(c.cfg.RunID, t.Slot)
	var grant *clientv3.LeaseGrantResponse
	err := retry(ctx, func() error {
		return c.request(ctx, c.cfg.RequestTimeout, func(rctx context.Context) (err error) {
			grant, err = c.cfg.Client.Grant(rctx, int64(c.cfg.RunTTL/time.Second))
			return err
		})
	})
	if err != nil {
		return t.waitErr(ctx, fmt.Errorf("run record lease: %w", err))
	}
	rec, err := json.Marshal(RunRecord{By: c.cfg.ID, Key: t.Key, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	var resp *clientv3.TxnResponse
	err = retry(ctx, func() error {
		return c.request(ctx, c.cfg.RequestTimeout, func(rctx context.Context) (err error) {
			resp, err = c.cfg.Client.Txn(rctx).
				If(append(t.intact(), clientv3.Compare(clientv3.CreateRevision(key), "=", 0))...).
				Then(clientv3.OpPut(key, string(rec), clientv3.WithLease(grant.ID))).
				Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).
				Commit()
			return err
		})
	})
	switch {
	case err != nil:
		err = t.waitErr(ctx, fmt.Errorf("run record: %w", err))
	case resp.Succeeded:
	default:
		kvs := resp.Responses[0].GetResponseRange().Kvs
		switch {
		case len(kvs) == 1 && clientv3.LeaseID(kvs[0].Lease) == grant.ID:
			// An earlier attempt committed but its answer was lost.
		case len(kvs) == 1:
			err = runDone(c.cfg.RunID, kvs[0].ModRevision)
		default:
			err = fmt.Errorf("run record: %w", ErrKeyDeleted)
		}
	}
	if err != nil {
		// The lease holds no record of this term's: it goes at once.
		_ = t.revokeRun(grant.ID)
		return err
	}
	t.run = grant.ID
	c.log.Info("run recorded", "key", key, "ttl", c.cfg.RunTTL)
	return nil
}

// ForgetRun takes back the term's record of its run id, if it made one,
// so that another term may run that firing: for a child that never
// started, or, when the caller allows a retry, one that failed. Its
// record's lease holds nothing else. A record that cannot be taken back
// stays until its lease expires.
func (t *Term) ForgetRun() {
	id := t.run
	if id == 0 {
		return
	}
	t.run = 0
	if err := t.revokeRun(id); err != nil {
		t.c.log.Warn("run record not taken back; it stays until it expires", "lease", leaseHex(id), "ttl", t.c.cfg.RunTTL, "error", err)
		return
	}
	t.c.log.Info("run record taken back", "run_id", t.c.cfg.RunID)
}

func (t *Term) revokeRun(id clientv3.LeaseID) error {
	ctx, cancel := context.WithTimeout(context.Background(), t.c.cfg.RequestTimeout)
	defer cancel()
	_, err := t.c.cfg.Client.Revoke(clientv3.WithRequireLeader(ctx), id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	return err
}
