package cli

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// safety bounds every wait on a line; it is never what a test measures.
const safety = 60 * time.Second

// joinElection puts a term's queue key and sentinel as a candidate does
// (campaign/keys.go), attached to a new lease.
func joinElection(t *testing.T, c *clientv3.Client, l campaign.Layout, id string) clientv3.LeaseID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	lease, err := c.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	q := l.QueueKey(lease.ID)
	if _, err := c.Txn(ctx).Then(clientv3.OpPut(l.SentinelKey(lease.ID), q, clientv3.WithLease(lease.ID)),
		clientv3.OpPut(q, id, clientv3.WithLease(lease.ID))).Commit(); err != nil {
		t.Fatal(err)
	}
	return lease.ID
}

// watchLines runs w until the test ends and returns its lines as they come.
func watchLines(t *testing.T, w *statusWatch) <-chan string {
	t.Helper()
	r, pw := io.Pipe()
	w.out = pw
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.run(ctx) }()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run ended with %v, want nil once its context ended", err)
			}
		case <-time.After(safety):
			t.Errorf("run did not return within %s of its context's end", safety)
		}
		pw.Close()
	})
	return lines
}

func nextLine(t *testing.T, lines <-chan string, want string) string {
	t.Helper()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("stream ended, want a line with %q", want)
		}
		if !strings.Contains(l, want) {
			t.Fatalf("line %q, want one with %q", l, want)
		}
		return l
	case <-time.After(safety):
		t.Fatalf("no line within %s, want one with %q", safety, want)
	}
	return ""
}

// A watch opened at a revision that etcd has compacted away ends with
// ErrCompacted. The stream must resume from a fresh read, not stop: here
// a candidate joins and etcd compacts past the watch's revision between
// the first read and the watch, so the join is only in the next read.
func TestWatchResumesAfterCompaction(t *testing.T) {
	cluster := etcdtest.Start(t, etcdtest.Options{})
	c := cluster.Client(t)
	l, err := campaign.NewLayout("test/", "compacted")
	if err != nil {
		t.Fatal(err)
	}
	reads := make(chan int64, 100)
	var compactedAt int64
	w := &statusWatch{cli: c, layout: l, dial: safety, now: time.Now, notice: func(msg string) { t.Errorf("notice %q", msg) }}
	n := 0
	w.afterRead = func(rev int64) {
		if n++; n == 1 {
			joinElection(t, c, l, "c1")
			resp, err := c.Put(context.Background(), "test/other", "x")
			if err != nil {
				t.Error(err)
			} else if _, err := c.Compact(context.Background(), resp.Header.Revision); err != nil {
				t.Error(err)
			}
			compactedAt = resp.Header.Revision
		}
		reads <- rev
	}
	lines := watchLines(t, w)
	nextLine(t, lines, "state=no-leader waiting=0")
	first := nextRead(t, reads)
	nextLine(t, lines, "state=leading leader=c1 ")
	if second := nextRead(t, reads); second < compactedAt || first >= compactedAt {
		t.Fatalf("reads at revisions %d then %d, want the watch from the first to be compacted (at %d) and a fresh read after", first, second, compactedAt)
	}
	// The resumed watch follows the election on.
	joinElection(t, c, l, "c2")
	if l := nextLine(t, lines, "waiting=1"); !strings.Contains(l, "leader=c1 ") {
		t.Fatalf("line %q, want c1 leading and c2 waiting", l)
	}
}

func nextRead(t *testing.T, reads <-chan int64) int64 {
	t.Helper()
	select {
	case rev := <-reads:
		return rev
	case <-time.After(safety):
		t.Fatalf("no read within %s", safety)
	}
	return 0
}
