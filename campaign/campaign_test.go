package campaign_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
	"github.com/etcdlead/etcdlead/internal/testsupport/faultproxy"
)

// The campaign's promise at its own level, on a real etcd: Campaign returns
// a term only when no older term can still run a child. These tests run
// the campaign's goroutines (renewals, the guard's watches, its stream's
// progress requests, the wait) under the race detector. Each subtest has an election of its
// own on one etcd.

const safety = 30 * time.Second

// quiet is how long a test watches for something that must not happen
// once what it waits for is in place. Where it is used, the fault it
// looks for shows at once, so a longer watch would find nothing more.
const quiet = 300 * time.Millisecond

// skipIfShort leaves a test to the full suite under go test -short, which
// keeps the pure logic and, on real etcd, TestCampaign's cases (but those
// that wait on renewals), the term record's main case and the start read
// under a pause.
func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow: runs in the full suite (go test -race -p 1 ./...)")
	}
}

type fixture struct {
	t   *testing.T
	cli *clientv3.Client
	l   campaign.Layout
	n   int
	ttl time.Duration // of the campaigners made from now on
	// holders is the campaigners' Config.Holders, set before they are made.
	holders int
	// runID and runTTL are the campaigners' Config.RunID and RunTTL.
	runID  string
	runTTL time.Duration
	log    hclog.Logger // of the campaigners made from now on, if set
	// leaseWaitLog, if set, is the campaigners' Config.LeaseWaitLog.
	leaseWaitLog time.Duration
	// renew, if set, is the campaigners' Config.RenewInterval.
	renew time.Duration
	// renewed, if set before the campaigns it should hear start, hears
	// every renewal attempt.
	renewed func(time.Duration, error)
	front   chan string   // keys of candidates that became next in line
	barrier chan struct{} // a candidate waits for an older lease
}

func (f *fixture) Renewed(latency time.Duration, err error) {
	if f.renewed != nil {
		f.renewed(latency, err)
	}
}
func (f *fixture) BarrierWait()       { f.barrier <- struct{}{} }
func (f *fixture) Paused()            {}
func (f *fixture) Queued(string, int) {}
func (f *fixture) Front(key string)   { f.front <- key }

func newFixture(t *testing.T, cli *clientv3.Client) *fixture {
	l, err := campaign.NewLayout("test/", t.Name()[strings.Index(t.Name(), "/")+1:])
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, cli: cli, l: l, ttl: 10 * time.Second, front: make(chan string, 16), barrier: make(chan struct{}, 16)}
}

func (f *fixture) campaigner(noWait bool) *campaign.Campaigner {
	f.t.Helper()
	f.n++
	c, err := campaign.New(campaign.Config{
		Client: f.cli, Layout: f.l, ID: fmt.Sprintf("c%d", f.n), Logger: f.log,
		Timing:         campaign.Timing{TTL: f.ttl, KillTimeout: 750 * time.Millisecond, FenceMargin: 250 * time.Millisecond, RenewInterval: f.renew},
		RequestTimeout: 5 * time.Second, Now: bootclock.Now, NoWait: noWait, Observer: f,
		LeaseWaitLog: f.leaseWaitLog, Holders: f.holders, RunID: f.runID, RunTTL: f.runTTL,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

type result struct {
	term *campaign.Term
	err  error
}

// start campaigns in the background; the channel gets the outcome.
func (f *fixture) start(ctx context.Context) <-chan result {
	c := f.campaigner(false)
	out := make(chan result, 1)
	go func() {
		t, err := c.Campaign(ctx)
		out <- result{t, err}
	}()
	return out
}

func (f *fixture) lead() *campaign.Term {
	f.t.Helper()
	return f.await(f.start(f.t.Context()))
}

func (f *fixture) await(ch <-chan result) *campaign.Term {
	f.t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			f.t.Fatalf("campaign: %v", r.err)
		}
		f.t.Cleanup(r.term.Revoke)
		return r.term
	case <-time.After(safety):
		f.t.Fatalf("no term within %s", safety)
	}
	return nil
}

// waiting starts a candidate and returns once its keys are in etcd: once
// more than ahead valid sentinels are.
func (f *fixture) waiting(ctx context.Context, ahead int) <-chan result {
	f.t.Helper()
	ch := f.start(ctx)
	deadline := time.Now().Add(safety)
	for {
		resp, err := f.cli.Get(ctx, f.l.SentinelPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			f.t.Fatal(err)
		}
		valid := 0
		for _, kv := range resp.Kvs {
			if f.l.ValidSentinel(kv) {
				valid++
			}
		}
		if valid > ahead {
			return ch
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("candidate not queued within %s", safety)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		<-f.cli.Watch(wctx, f.l.SentinelPrefix(), clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		cancel()
	}
}

// still fails if ch delivers before the other event happens: the candidate
// must still wait.
func still(t *testing.T, ch <-chan result, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: the candidate stopped waiting (err %v)", what, r.err)
	default:
	}
}

// newest is the newest valid queue key of l.
func newest(t *testing.T, cli *clientv3.Client, l campaign.Layout) string {
	t.Helper()
	resp, err := cli.Get(t.Context(), l.QueuePrefix(), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if l.ValidQueueKey(kv) {
			return string(kv.Key)
		}
	}
	t.Fatal("no valid queue key")
	return ""
}

// next waits until the candidate with key says it is next in line, which
// it says only from its wait, and fails if b stops waiting first.
func (f *fixture) next(b <-chan result, key string) {
	f.t.Helper()
	for got := ""; got != key; {
		select {
		case got = <-f.front:
		case r := <-b:
			f.t.Fatalf("the candidate stopped waiting (err %v)", r.err)
		case <-time.After(safety):
			f.t.Fatalf("%s did not become next in line", key)
		}
	}
}

// waitsOnLease blocks until a candidate says it waits for an older lease,
// and fails if b stops waiting first.
func (f *fixture) waitsOnLease(b <-chan result) {
	f.t.Helper()
	select {
	case <-f.barrier:
	case r := <-b:
		f.t.Fatalf("the candidate stopped waiting (err %v)", r.err)
	case <-time.After(safety):
		f.t.Fatal("the candidate did not wait for the older lease")
	}
}

// fromWatch fails unless err is want and came from the guard's watch at
// once, not from a read of its keys (after a broken watch).
func fromWatch(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) || strings.HasPrefix(err.Error(), "re-read") {
		t.Fatalf("the term ended with %v, want %v from the watch", err, want)
	}
}

// endsFromWatch waits for a waiting candidate's campaign to end, and checks
// it ended with want from the guard's watch.
func endsFromWatch(t *testing.T, b <-chan result, want error) {
	t.Helper()
	select {
	case r := <-b:
		fromWatch(t, r.err, want)
	case <-time.After(safety):
		t.Fatalf("the waiting campaign did not end with %v", want)
	}
}

// stallOnce returns a function that blocks its first caller until release
// is called, and a channel closed once that caller is inside: a test holds
// one of the campaign's goroutines there. Release may be called more than
// once; tests defer it so that a failure leaves nothing blocked.
func stallOnce() (stall func(), inside <-chan struct{}, release func()) {
	in, out := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stall = func() {
		once.Do(func() {
			close(in)
			<-out
		})
	}
	return stall, in, sync.OnceFunc(func() { close(out) })
}

func awaitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(safety):
		t.Fatalf("%s: not within %s", what, safety)
	}
}

// testLog is a logger that keeps its lines for a test to wait for, and
// calls stall, if set, in the logging goroutine before it keeps a line.
// Unlike hclog's own loggers it takes no lock around the call, so a stalled
// goroutine holds up no other goroutine's log calls.
type testLog struct {
	hclog.Logger // for the methods the campaign does not call
	stall        func(msg string)
	mu           sync.Mutex
	lines        []string
	grew         chan struct{} // closed and replaced at each line
}

func newTestLog() *testLog {
	return &testLog{Logger: hclog.NewNullLogger(), grew: make(chan struct{})}
}

func (l *testLog) Trace(msg string, args ...any) { l.line("trace", msg, args) }
func (l *testLog) Debug(msg string, args ...any) { l.line("debug", msg, args) }
func (l *testLog) Info(msg string, args ...any)  { l.line("info", msg, args) }
func (l *testLog) Warn(msg string, args ...any)  { l.line("warn", msg, args) }
func (l *testLog) Error(msg string, args ...any) { l.line("error", msg, args) }
func (l *testLog) IsInfo() bool                  { return true }
func (l *testLog) IsDebug() bool                 { return true }

// line keeps "level: msg k=v ...".
func (l *testLog) line(level, msg string, args []any) {
	if l.stall != nil {
		l.stall(msg)
	}
	var b strings.Builder
	b.WriteString(level + ": " + msg)
	for i := 0; i+1 < len(args); i += 2 {
		fmt.Fprintf(&b, " %v=%v", args[i], args[i+1])
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, b.String())
	close(l.grew)
	l.grew = make(chan struct{})
}

// has reports whether a line logged so far contains part.
func (l *testLog) has(part string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.lines, func(line string) bool { return strings.Contains(line, part) })
}

// String is every line logged so far, one per line.
func (l *testLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// count is how many lines were logged so far.
func (l *testLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// waitFor returns the index of the first line from index from on that
// contains every one of parts, waiting for it if need be. It fails if held
// (when not nil) delivers first: the term ended before the line came.
func (l *testLog) waitFor(t *testing.T, from int, held <-chan error, parts ...string) int {
	t.Helper()
	deadline := time.After(safety)
	for {
		l.mu.Lock()
		for i := from; i < len(l.lines); i++ {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(l.lines[i], p)
			}
			if all {
				l.mu.Unlock()
				return i
			}
		}
		grew := l.grew
		l.mu.Unlock()
		select {
		case <-grew:
		case err := <-held:
			t.Fatalf("the term ended (%v) before a log line with %q", err, parts)
		case <-deadline:
			t.Fatalf("no log line with %q within %s", parts, safety)
		}
	}
}

func newProxy(t *testing.T, c *etcdtest.Cluster) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(c.Member(0).ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// compactPast writes beside the election and compacts etcd's history up
// to the last write, so that a watch of the election's keys resumed from
// before must skip what was compacted. The compaction is etcd-wide; the
// other subtests do not mind, as each watches from revisions it read after.
func compactPast(t *testing.T, cli *clientv3.Client, l campaign.Layout) {
	t.Helper()
	var last int64
	for i := range 20 {
		resp, err := cli.Put(t.Context(), l.Prefix()+"-beside", fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	if _, err := cli.Compact(t.Context(), last, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
}

func grant(t *testing.T, cli *clientv3.Client) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = cli.Revoke(context.Background(), resp.ID) })
	return resp.ID
}

func hold(t *campaign.Term) <-chan error {
	out := make(chan error, 1)
	go func() { out <- t.Lead(context.Background(), func(time.Duration) {}) }()
	return out
}

func awaitErr(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(safety):
		t.Fatalf("no end within %s", safety)
	}
	return nil
}

func TestCampaign(t *testing.T) {
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	ctx := t.Context()

	t.Run("handoff", func(t *testing.T) {
		f := newFixture(t, cli)
		a := f.lead()
		b := f.waiting(ctx, 1)
		// B says it is next only from its wait: it did not start beside A.
		f.next(b, newest(t, cli, f.l))
		still(t, b, "A leads")
		a.Revoke()
		tb := f.await(b)
		if tb.Rev <= a.Rev {
			t.Errorf("B's fencing token %d not above A's %d", tb.Rev, a.Rev)
		}
	})

	// A sentinel deleted by hand while its lease lives: the waiter that
	// watched it waits the lease out.
	t.Run("sentinel-deleted-lease-lives", func(t *testing.T) {
		f := newFixture(t, cli)
		a := f.lead()
		held := hold(a)
		b := f.waiting(ctx, 1)
		if _, err := cli.Delete(ctx, a.Sentinel); err != nil {
			t.Fatal(err)
		}
		if err := awaitErr(t, held); !errors.Is(err, campaign.ErrKeyDeleted) {
			t.Fatalf("A's Lead = %v, want ErrKeyDeleted", err)
		}
		// A's queue key is still there; delete it too, leaving only the
		// live lease: B must still wait.
		if _, err := cli.Delete(ctx, a.Key); err != nil {
			t.Fatal(err)
		}
		f.waitsOnLease(b)
		c := f.waiting(ctx, 1) // a newcomer sees nothing of A at all
		still(t, b, "A's lease lives")
		a.Revoke()
		f.await(b)
		// The newcomer is behind B, not beside it.
		still(t, c, "B leads")
	})

	// Deleting the queue key only: newcomers wait on the sentinel.
	t.Run("queue-key-deleted", func(t *testing.T) {
		f := newFixture(t, cli)
		a := f.lead()
		held := hold(a)
		if _, err := cli.Delete(ctx, a.Key); err != nil {
			t.Fatal(err)
		}
		if err := awaitErr(t, held); !errors.Is(err, campaign.ErrKeyDeleted) {
			t.Fatalf("A's Lead = %v, want ErrKeyDeleted", err)
		}
		b := f.waiting(ctx, 1)
		f.waitsOnLease(b)
		if _, err := f.campaigner(true).Campaign(ctx); !errors.Is(err, campaign.ErrNotLeader) {
			t.Errorf("--no-wait beside a live older lease = %v, want ErrNotLeader", err)
		}
		a.Revoke()
		f.await(b)
	})

	// A waiter whose own key goes leaves at once, not when its turn comes.
	t.Run("waiter-key-deleted", func(t *testing.T) {
		f := newFixture(t, cli)
		f.lead()
		b := f.waiting(ctx, 1)
		if _, err := cli.Delete(ctx, newest(t, cli, f.l)); err != nil {
			t.Fatal(err)
		}
		endsFromWatch(t, b, campaign.ErrKeyDeleted)
	})

	// A put that moves the leader's key to another lease ends its term.
	t.Run("key-replaced", func(t *testing.T) {
		f := newFixture(t, cli)
		a := f.lead()
		held := hold(a)
		if _, err := cli.Put(ctx, a.Sentinel, "mine now"); err != nil {
			t.Fatal(err)
		}
		fromWatch(t, awaitErr(t, held), campaign.ErrKeyReplaced)
	})

	// A put that rewrites the leader's record with another raft term ends
	// its term: a successor would trust that term, once the lease ended
	// early, and clear the record while the child may run.
	t.Run("record-rewritten", func(t *testing.T) {
		f := newFixture(t, cli)
		a := f.lead()
		held := hold(a)
		resp, err := cli.Get(ctx, a.Record)
		if err != nil || len(resp.Kvs) == 0 {
			t.Fatalf("the leader's record: %v, %d found", err, len(resp.Kvs))
		}
		rec, ok := campaign.ParseRecord(resp.Kvs[0].Value)
		if !ok {
			t.Fatalf("the leader's record %q does not parse", resp.Kvs[0].Value)
		}
		rec.RaftTerm += 1000
		forged, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, a.Record, string(forged)); err != nil {
			t.Fatal(err)
		}
		fromWatch(t, awaitErr(t, held), campaign.ErrKeyReplaced)
	})

	// Foreign keys between two terms fill the start read's first page; the
	// read goes on past them and still finds the older term, by its queue
	// key (its sentinel deleted by hand), by its sentinel (its queue key
	// deleted by hand), or, with foreign keys in every prefix, by any of
	// its keys.
	for _, c := range []struct {
		name   string
		forged []string // the prefixes forged in
		gone   func(a *campaign.Term) string
	}{
		{"foreign-queue-keys-paged-past", []string{"queue"}, func(a *campaign.Term) string { return a.Sentinel }},
		{"foreign-sentinels-paged-past", []string{"sentinel"}, func(a *campaign.Term) string { return a.Key }},
		{"foreign-keys-everywhere-paged-past", []string{"queue", "sentinel", "record"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, cli)
			a := f.lead()
			xctx, xcancel := context.WithCancel(ctx)
			x := f.waiting(xctx, 1)
			prefixes := map[string]string{"queue": f.l.QueuePrefix(), "sentinel": f.l.SentinelPrefix(), "record": f.l.RecordPrefix()}
			for _, p := range c.forged {
				for i := range 12 {
					if _, err := cli.Put(ctx, fmt.Sprintf("%sz%d", prefixes[p], i), "forged"); err != nil {
						t.Fatal(err)
					}
				}
			}
			b := f.waiting(ctx, 2)
			bKey := newest(t, cli, f.l)
			// A keeps its lease; one of its keys goes by hand.
			if c.gone != nil {
				if _, err := cli.Delete(ctx, c.gone(a)); err != nil {
					t.Fatal(err)
				}
			}
			// X leaves: B wakes up, and its start read must read past the forged
			// keys to find A's other key, which makes B next in line.
			xcancel()
			if r := <-x; !errors.Is(r.err, campaign.ErrNotLeader) {
				t.Fatalf("X's campaign = %v, want ErrNotLeader", r.err)
			}
			f.next(b, bKey)
			still(t, b, "A's lease lives behind forged keys")
			a.Revoke()
			f.await(b)
		})
	}

	// A resign request reaches a candidate that still waits.
	t.Run("resign-while-waiting", func(t *testing.T) {
		f := newFixture(t, cli)
		f.lead()
		b := f.waiting(ctx, 1)
		bKey := newest(t, cli, f.l)
		if _, err := cli.Put(ctx, f.l.ResignKey(), bKey); err != nil {
			t.Fatal(err)
		}
		endsFromWatch(t, b, campaign.ErrResigned)
		// B's keys went with its revoked lease.
		if c, _ := cli.Get(ctx, bKey, clientv3.WithCountOnly()); c.Count != 0 {
			t.Error("B's key is still there")
		}
	})

	// A context that ends while another term leads: ErrNotLeader.
	t.Run("wait-ends", func(t *testing.T) {
		f := newFixture(t, cli)
		f.lead()
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		if _, err := f.campaigner(false).Campaign(wctx); !errors.Is(err, campaign.ErrNotLeader) {
			t.Errorf("Campaign = %v, want ErrNotLeader", err)
		}
	})

	// Lead renews in its caller's goroutine: it does not return while a
	// renewal is still under way, here held inside onRenew, so no deadline
	// reaches a fence that its caller has already taken down.
	t.Run("hold-waits-for-renewal", func(t *testing.T) {
		skipIfShort(t)
		f := newFixture(t, cli)
		a := f.lead()
		stall, inside, release := stallOnce()
		defer release()
		hctx, cancel := context.WithCancel(ctx)
		defer cancel()
		held := make(chan error, 1)
		go func() { held <- a.Lead(hctx, func(time.Duration) { stall() }) }()
		awaitClosed(t, inside, "first renewal")
		cancel()
		select {
		case err := <-held:
			t.Fatalf("Lead returned (%v) while its renewal was still calling onRenew", err)
		case <-time.After(quiet):
		}
		release()
		if err := awaitErr(t, held); !errors.Is(err, context.Canceled) {
			t.Errorf("Lead = %v, want context.Canceled", err)
		}
	})

	// A renewal under way when Lead's context ends is abandoned, not waited
	// out: the revoke that follows a child's exit is not held up by it.
	t.Run("hold-cancel-abandons-renewal", func(t *testing.T) {
		skipIfShort(t)
		p := newProxy(t, cluster)
		f := newFixture(t, etcdtest.NewClient(t, p.Addr()))
		failed := make(chan struct{}, 1)
		f.renewed = func(_ time.Duration, err error) {
			if err != nil {
				select {
				case failed <- struct{}{}:
				default:
				}
			}
		}
		a := f.lead()
		r := campaign.DefaultRenewInterval(a.TTL)
		p.Blackhole()
		defer p.Pass() // before the cleanup's revoke
		hctx, cancel := context.WithCancel(ctx)
		defer cancel()
		held := make(chan error, 1)
		go func() { held <- a.Lead(hctx, func(time.Duration) {}) }()
		// The first attempt fails when its bound r runs out; by then the
		// ticker has fired, so the next attempt is sent at once and hangs.
		select {
		case <-failed:
		case err := <-held:
			t.Fatalf("Lead ended (%v) while etcd was cut off", err)
		case <-time.After(safety):
			t.Fatal("no failed renewal while etcd was cut off")
		}
		cancel()
		cancelled := time.Now()
		if err := awaitErr(t, held); !errors.Is(err, context.Canceled) {
			t.Errorf("Lead = %v, want context.Canceled", err)
		}
		if took := time.Since(cancelled); took >= r/2 {
			t.Errorf("Lead returned %s after its context ended: the renewal under way (bounded by r = %s) was not abandoned", took, r)
		}
	})

	// Revoke returns only once the term's guard has ended, here held inside
	// a log call about the key it saw deleted.
	t.Run("revoke-waits-for-guard", func(t *testing.T) {
		f := newFixture(t, cli)
		stall, inside, release := stallOnce()
		defer release()
		log := newTestLog()
		log.stall = func(msg string) {
			if msg == "key deleted" {
				stall()
			}
		}
		f.log = log
		a := f.lead()
		if _, err := cli.Delete(ctx, a.Key); err != nil {
			t.Fatal(err)
		}
		awaitClosed(t, inside, "the guard's log of the deleted key")
		revoked := make(chan struct{})
		go func() {
			a.Revoke()
			close(revoked)
		}()
		select {
		case <-revoked:
			t.Fatal("Revoke returned while the term's guard was still running")
		case <-time.After(quiet):
		}
		release()
		awaitClosed(t, revoked, "Revoke after the guard ended")
		if c, _ := cli.Get(ctx, a.Sentinel, clientv3.WithCountOnly()); c.Count != 0 {
			t.Error("the sentinel outlived the revoke")
		}
	})

	// Campaign returns only once the renewals of its wait have ended, here
	// held inside the observer's report of one.
	t.Run("campaign-waits-for-renewal", func(t *testing.T) {
		skipIfShort(t)
		f := newFixture(t, cli)
		f.lead()
		stall, inside, release := stallOnce()
		defer release()
		f.renewed = func(time.Duration, error) { stall() }
		f.ttl = campaign.MinTTL // a waiter renews every T/3
		bctx, cancel := context.WithCancel(ctx)
		defer cancel()
		b := f.waiting(bctx, 1)
		awaitClosed(t, inside, "the waiter's first renewal")
		cancel()
		select {
		case r := <-b:
			t.Fatalf("Campaign returned (%v) while its renewal was still reporting", r.err)
		case <-time.After(quiet):
		}
		release()
		select {
		case r := <-b:
			if !errors.Is(r.err, campaign.ErrNotLeader) {
				t.Errorf("Campaign = %v, want ErrNotLeader", r.err)
			}
		case <-time.After(safety):
			t.Fatal("Campaign did not return after its renewal ended")
		}
	})

	// The campaign transaction puts the queue key (value: the id) and the
	// sentinel (value: the queue key) under the term's lease, and the
	// record on no lease, all in one revision, the fencing token; the term
	// says what etcd holds.
	t.Run("enqueue", func(t *testing.T) {
		f := newFixture(t, cli)
		a := f.lead()
		id := fmt.Sprintf("c%d", f.n)
		if a.Key != f.l.QueueKey(a.Lease) || a.Sentinel != f.l.SentinelKey(a.Lease) || a.Record != f.l.RecordKey(a.Lease) {
			t.Errorf("term keys %s, %s, %s; want %s, %s, %s", a.Key, a.Sentinel, a.Record, f.l.QueueKey(a.Lease), f.l.SentinelKey(a.Lease), f.l.RecordKey(a.Lease))
		}
		resp, err := cli.Txn(ctx).Then(clientv3.OpGet(a.Key), clientv3.OpGet(a.Sentinel), clientv3.OpGet(a.Record)).Commit()
		if err != nil {
			t.Fatal(err)
		}
		// The record names the queue key, the TTL and the raft term known
		// before the grant (docs/design.md, "The term record").
		for i, want := range []struct {
			key, value string
			lease      clientv3.LeaseID
		}{{a.Key, "^" + regexp.QuoteMeta(id) + "$", a.Lease}, {a.Sentinel, "^" + regexp.QuoteMeta(a.Key) + "$", a.Lease},
			{a.Record, `^\{"key":"` + regexp.QuoteMeta(a.Key) + `","ttl":10,"raft_term":[1-9]\d*\}$`, 0}} {
			kvs := resp.Responses[i].GetResponseRange().Kvs
			if len(kvs) != 1 {
				t.Fatalf("%s: %d keys in etcd, want 1", want.key, len(kvs))
			}
			kv := kvs[0]
			if !regexp.MustCompile(want.value).Match(kv.Value) || clientv3.LeaseID(kv.Lease) != want.lease ||
				kv.CreateRevision != a.Rev || kv.ModRevision != a.Rev {
				t.Errorf("%s = %q, lease %x, created at %d, modified at %d; want a value matching %q, lease %x, both at the term's %d",
					want.key, kv.Value, kv.Lease, kv.CreateRevision, kv.ModRevision, want.value, int64(want.lease), a.Rev)
			}
		}
		ttl, err := cli.TimeToLive(ctx, a.Lease, clientv3.WithAttachedKeys())
		if err != nil {
			t.Fatal(err)
		}
		var attached []string
		for _, k := range ttl.Keys {
			attached = append(attached, string(k))
		}
		want := []string{a.Key, a.Sentinel}
		slices.Sort(attached)
		slices.Sort(want)
		if !slices.Equal(attached, want) {
			t.Errorf("keys on the term's lease %q, want %q", attached, want)
		}
		if time.Duration(ttl.GrantedTTL)*time.Second != a.TTL || a.TTL != f.ttl {
			t.Errorf("term TTL %s, etcd granted %ds, asked %s", a.TTL, ttl.GrantedTTL, f.ttl)
		}
	})

	// A live term's queue key and sentinel both deleted by hand in one
	// revision: its record stays, and the waiter that watched them waits
	// for the lease itself. (With the record deleted too, as a delete of
	// the election's prefix does, a newcomer would find nothing to wait
	// for: docs/design.md, "What stays bounded".)
	t.Run("keys-deleted-lease-lives", func(t *testing.T) {
		f := newFixture(t, cli)
		a := f.lead()
		b := f.waiting(ctx, 1)
		f.next(b, newest(t, cli, f.l))
		if _, err := cli.Txn(ctx).Then(clientv3.OpDelete(a.Key), clientv3.OpDelete(a.Sentinel)).Commit(); err != nil {
			t.Fatal(err)
		}
		f.waitsOnLease(b)
		still(t, b, "A's lease lives")
		a.Revoke()
		f.await(b)
	})

	// The log names the predecessor's id, and a wait for an older lease
	// says every LeaseWaitLog for at most how long it may still last: both
	// while the sentinel is watched (queue key deleted) and while the
	// lease is asked about (sentinel deleted too, under the watch: the
	// record is left).
	t.Run("wait-logged", func(t *testing.T) {
		f := newFixture(t, cli)
		log := newTestLog()
		f.log, f.leaseWaitLog = log, 100*time.Millisecond
		a := f.lead()
		if _, err := cli.Delete(ctx, a.Key); err != nil {
			t.Fatal(err)
		}
		b := f.waiting(ctx, 1) // finds only A's sentinel, and watches it
		f.waitsOnLease(b)
		i := log.waitFor(t, 0, nil, "still waiting for predecessor lease to end", "key="+a.Key, "at_most=")
		log.waitFor(t, i+1, nil, "still waiting for predecessor lease to end", "key="+a.Key)
		bKey := newest(t, cli, f.l)
		c := f.waiting(ctx, 2)
		log.waitFor(t, 0, nil, "waiting on predecessor", "key="+bKey, "id=c2")
		before := log.count()
		if _, err := cli.Delete(ctx, a.Sentinel); err != nil {
			t.Fatal(err)
		}
		i = log.waitFor(t, before, nil, "info: waiting for predecessor lease to end", "key="+a.Key, "at_most=")
		log.waitFor(t, i+1, nil, "still waiting for predecessor lease to end", "key="+a.Key, "at_most=")
		a.Revoke()
		f.await(b)
		still(t, c, "B leads")
	})

	// A guard's watch resumed from compacted history (here after its
	// connection dropped) neither ends the term nor leaves it unguarded: the
	// guard reads its keys and watches on from that read, so a later delete
	// still reaches it through the watch. The TTL keeps the guard's progress
	// requests, every T/3, out of the way.
	t.Run("compaction-then-delete", func(t *testing.T) {
		p := newProxy(t, cluster)
		f := newFixture(t, etcdtest.NewClient(t, p.Addr()))
		f.ttl = 30 * time.Second
		log := newTestLog()
		f.log = log
		a := f.lead()
		held := hold(a)
		compactPast(t, cli, f.l)
		p.Reset()
		p.Pass()
		i := log.waitFor(t, 0, held, "own-key watch interrupted", "compacted")
		log.waitFor(t, i, held, "own keys intact; watching them again")
		select {
		case err := <-held:
			t.Fatalf("the compaction ended the term: %v", err)
		default:
		}
		if _, err := cli.Delete(ctx, a.Key); err != nil {
			t.Fatal(err)
		}
		fromWatch(t, awaitErr(t, held), campaign.ErrKeyDeleted)
	})

	// A delete the guard's watch missed while cut off, then compacted out of
	// history: the guard's read after the compacted watch finds it, within
	// T/3.
	t.Run("delete-compacted-away", func(t *testing.T) {
		p := newProxy(t, cluster)
		f := newFixture(t, etcdtest.NewClient(t, p.Addr()))
		f.ttl = 30 * time.Second
		log := newTestLog()
		f.log = log
		began := time.Now() // before the guard starts
		a := f.lead()
		held := hold(a)
		p.Blackhole()
		if _, err := cli.Delete(ctx, a.Key); err != nil {
			t.Fatal(err)
		}
		compactPast(t, cli, f.l)
		p.Pass()
		if err := awaitErr(t, held); !errors.Is(err, campaign.ErrKeyDeleted) {
			t.Fatalf("A's Lead = %v, want ErrKeyDeleted", err)
		}
		if took := time.Since(began); took >= a.TTL/3 {
			t.Errorf("the term ended %s after it began: not at once after the compacted watch", took)
		}
		// The case happened as claimed.
		log.waitFor(t, 0, nil, "own-key watch interrupted", "compacted")
	})

	// A resign request ends the leader's term only when it names the
	// leader's queue key: one naming another candidate leaves it leading.
	t.Run("resign-while-leading", func(t *testing.T) {
		skipIfShort(t)
		f := newFixture(t, cli)
		a := f.lead()
		renewed := make(chan struct{}, 1)
		held := make(chan error, 1)
		go func() {
			held <- a.Lead(context.Background(), func(time.Duration) {
				select {
				case renewed <- struct{}{}:
				default:
				}
			})
		}()
		b := f.waiting(ctx, 1)
		if _, err := cli.Put(ctx, f.l.ResignKey(), newest(t, cli, f.l)); err != nil {
			t.Fatal(err)
		}
		endsFromWatch(t, b, campaign.ErrResigned)
		// A's guard got the same put as B's. A term it ended would renew
		// no more; two fresh renewals show A still leads.
		select {
		case <-renewed:
		default:
		}
		for range 2 {
			select {
			case <-renewed:
			case err := <-held:
				t.Fatalf("A's term ended (%v) on a resign request naming B", err)
			case <-time.After(safety):
				t.Fatal("A stopped renewing")
			}
		}
		if _, err := cli.Put(ctx, f.l.ResignKey(), a.Key); err != nil {
			t.Fatal(err)
		}
		fromWatch(t, awaitErr(t, held), campaign.ErrResigned)
	})

	// Keys in a term's name shape but not on the lease they name (on none,
	// or on another live lease) belong to no term: they neither block a
	// candidate nor count as a term ahead of it.
	t.Run("forged-keys-skipped", func(t *testing.T) {
		f := newFixture(t, cli)
		forge := func() clientv3.LeaseID {
			named, other := grant(t, cli), grant(t, cli)
			for _, kv := range []struct {
				key, value string
				lease      clientv3.LeaseID
			}{
				{f.l.QueueKey(named), "forged", clientv3.NoLease},
				{f.l.SentinelKey(named), f.l.QueueKey(named), clientv3.NoLease},
				{f.l.QueueKey(other), "forged", named},
				{f.l.SentinelKey(other), f.l.QueueKey(other), named},
			} {
				if _, err := cli.Put(ctx, kv.key, kv.value, clientv3.WithLease(kv.lease)); err != nil {
					t.Fatal(err)
				}
			}
			return named
		}
		forge()
		a, err := f.campaigner(true).Campaign(ctx)
		if err != nil {
			t.Fatalf("a campaign that may not wait, over forged keys only: %v", err)
		}
		t.Cleanup(a.Revoke)
		named := forge() // between A and B
		b := f.waiting(ctx, 1)
		// Next in line means at most one term ahead: the forged keys did
		// not count.
		f.next(b, newest(t, cli, f.l))
		// The forged keys on a lease go with it; A still leads.
		if _, err := cli.Revoke(ctx, named); err != nil {
			t.Fatal(err)
		}
		still(t, b, "A leads")
		a.Revoke()
		// The leaseless forged keys below B stay, and do not hold it up.
		f.await(b)
	})
}
