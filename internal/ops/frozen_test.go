package ops

import (
	"context"
	"net/http"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// observer hands a campaign's reports to a Monitor, as the run loop's does
// (internal/runner), and counts the failed renewals.
type observer struct {
	*Monitor
	failed atomic.Int32
	queued chan struct{}
}

func (o *observer) Renewed(latency time.Duration, err error) {
	o.Monitor.Renewed(latency, err)
	if err != nil {
		o.failed.Add(1)
	}
}
func (o *observer) Queued(key string, _ int) {
	o.Monitor.Queued(key)
	select {
	case o.queued <- struct{}{}:
	default:
	}
}
func (o *observer) Front(string) {}

// With etcd frozen, a waiting candidate's renewals fail before one TTL is
// up; /healthz stays 200 through them until etcd has not answered for one
// TTL, and then its body says so with the time and the bound, on a real
// etcd. Under the old rule the first failed renewal made it 503 at once,
// saying "etcd not reached within one TTL" a fraction of a TTL in.
func TestHealthWithEtcdFrozen(t *testing.T) {
	skipIfShort(t)
	const ttl = 3 * time.Second
	cluster := etcdtest.Start(t, etcdtest.Options{})
	layout, err := campaign.NewLayout("ops/", "frozen")
	if err != nil {
		t.Fatal(err)
	}
	candidate := func(id string, o campaign.Observer) *campaign.Campaigner {
		c, err := campaign.New(campaign.Config{
			Client: cluster.Client(t), Layout: layout, ID: id,
			Timing: campaign.Timing{TTL: ttl, KillTimeout: 750 * time.Millisecond, FenceMargin: 250 * time.Millisecond}, RequestTimeout: 5 * time.Second,
			Now: bootclock.Now, Observer: o,
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	lead, err := candidate("a", nil).Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	led := make(chan struct{})
	go func() {
		defer close(led)
		_ = lead.Lead(ctx, func(time.Duration) {})
	}()
	m := New("frozen", "b", "v1.2.3", ttl, nil)
	o := &observer{Monitor: m, queued: make(chan struct{}, 1)}
	waited := make(chan error, 1)
	go func() {
		_, err := candidate("b", o).Campaign(ctx)
		waited <- err
	}()
	select {
	case <-o.queued:
	case err := <-waited:
		t.Fatalf("the second candidate did not queue: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the second candidate did not queue within 30s")
	}

	h := Handler(m)
	frozen := time.Now()
	cluster.Member(0).Freeze(t)
	healthyAfterFailure := false
	var body string
	var unhealthy time.Duration // from the freeze to the probe that saw 503
	for {
		failed := o.failed.Load() > 0
		unhealthy = time.Since(frozen)
		code, b := get(t, h, "/healthz")
		if code != http.StatusOK {
			body = b
			break
		}
		healthyAfterFailure = healthyAfterFailure || failed
		if unhealthy > 3*ttl {
			t.Fatalf("/healthz still 200 %q %s after etcd froze, more than one TTL (%s)", b, unhealthy, ttl)
		}
		time.Sleep(20 * time.Millisecond) // the pace of the probe
	}
	t.Logf("/healthz 503 %s after etcd froze, %d renewals failed by then: %q", unhealthy, o.failed.Load(), body)
	if !healthyAfterFailure {
		t.Errorf("/healthz went 503 with the first failed renewal (%d failed), %s after etcd froze", o.failed.Load(), unhealthy)
	}
	want := regexp.MustCompile(`^unhealthy: etcd last answered (\S+) ago, not within one TTL \(3s\)\n$`)
	match := want.FindStringSubmatch(body)
	if match == nil {
		t.Fatalf("/healthz %s after etcd froze: %q, want it to match %s", unhealthy, body, want)
	}
	// etcd answered last before it froze: the age the body gives is at
	// least one TTL, and at least the time since the freeze, less what an
	// answer already on its way when etcd stopped may take to arrive.
	const onItsWay = 100 * time.Millisecond
	if ago, err := time.ParseDuration(match[1]); err != nil || ago < ttl || ago < unhealthy-onItsWay {
		t.Errorf("/healthz %q %s after etcd froze: not one TTL since the last answer (%v)", body, unhealthy, err)
	}

	cluster.Member(0).Thaw(t)
	cancel()
	<-led
	lead.Revoke()
	<-waited
}
