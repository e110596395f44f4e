package campaign

import (
	"context"
	"encoding/json"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// HealthRecord is the verdict of a term's health check, at
// P.health/<lease hex> on the term's lease, for `etcdlead status`: written
// when the verdict changes, never periodically, and gone with the term.
type HealthRecord struct {
	Status string    `json:"status"` // starting, healthy or unhealthy
	At     time.Time `json:"at"`
}

// ParseHealth reads a health key's value.
func ParseHealth(value []byte) (rec HealthRecord, ok bool) {
	return rec, json.Unmarshal(value, &rec) == nil && rec.Status != ""
}

// RecordHealth writes the term's health verdict, attached to its lease.
func (t *Term) RecordHealth(ctx context.Context, rec HealthRecord) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return t.c.request(ctx, t.c.cfg.RequestTimeout, func(rctx context.Context) error {
		_, err := t.c.cfg.Client.Put(rctx, t.c.cfg.Layout.HealthKey(t.Lease), string(v), clientv3.WithLease(t.Lease))
		return err
	})
}
