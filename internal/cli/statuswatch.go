package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/connectivity"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/internal/logbuf"
	"github.com/etcdlead/etcdlead/internal/oneline"
	"github.com/etcdlead/etcdlead/signals"
)

const flagWatch = "watch"

// The pause between attempts while etcd does not answer: bounded, so the
// stream comes back soon after etcd does, and never given up.
const (
	watchRetryMin = 250 * time.Millisecond
	watchRetryMax = 5 * time.Second
)

// watchJSON is one line of `status --watch --json`: the election object of
// `status --json` (without the leader's TTL, which only a poll would keep
// current) and when and at which etcd revision it was read. Fields are only
// ever added.
type watchJSON struct {
	electionJSON
	Time     string `json:"time"`
	Revision int64  `json:"revision"`
}

// statusWatch follows one election: it prints its state, then the state
// again each time it changes, until its context ends. It costs one watch
// stream; every batch of events that may change the state is followed by
// a fresh read, so what it prints is always a read's, never a model kept
// beside etcd's.
type statusWatch struct {
	cli    *clientv3.Client
	layout campaign.Layout
	dial   time.Duration // bounds each read
	json   bool
	out    io.Writer
	notice func(msg string) // one line on stderr
	now    func() time.Time
	// afterRead, if set, runs before each watch opens, with the revision
	// of the read it follows (tests).
	afterRead func(rev int64)

	last  []byte // the state printed last, to print only changes
	stale bool   // an outage was reported: print the next state whatever it is
	// healthRefused: the role may not read the health verdicts, which are
	// then not followed.
	healthRefused bool
}

func watchStatus(c *cli.Context, cli *clientv3.Client, l campaign.Layout, dial time.Duration) error {
	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	sigs := signals.CatchStop()
	defer sigs.Stop()
	go func() {
		select {
		case <-sigs.C:
			cancel()
		case <-ctx.Done():
		}
	}()
	w := &statusWatch{cli: cli, layout: l, dial: dial, json: c.Bool(flagJSON), out: os.Stdout, now: time.Now,
		notice: func(msg string) { printNotice(c.App, msg) }}
	return w.run(ctx)
}

// run returns nil once ctx ends, and an *exitError when etcd refuses
// (credentials, permissions) or stdout fails. Everything else is retried.
func (w *statusWatch) run(ctx context.Context) error {
	lost := connLost(ctx, w.cli)
	retry := watchRetryMin
	for {
		drain(lost)
		rev, err := w.readAndEmit(ctx)
		var compacted bool
		if err == nil {
			retry = watchRetryMin
			compacted, err = w.follow(ctx, rev, lost)
		}
		var end *exitError
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &end):
			return err
		case err != nil:
			if !w.stale {
				w.notice(fmt.Sprintf("status: etcd unreachable (%v): retrying until it answers", err))
				w.stale = true
			}
		case compacted:
			// The revision the watch resumes from is gone; the
			// current state is a read away, and nothing is lost by
			// reading it at once.
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
		retry = min(2*retry, watchRetryMax)
	}
}

// follow watches the election's keys from rev+1 and prints the state after
// each batch of events that is newer than the last read. It returns nil
// when the watch ended (connection lost, no raft leader, closed) and the
// state must be read afresh, compacted true when etcd compacted past the
// watch's revision, and a read's error or an *exitError otherwise.
func (w *statusWatch) follow(ctx context.Context, rev int64, lost <-chan struct{}) (bool, error) {
	if w.afterRead != nil {
		w.afterRead(rev)
	}
	// WithRequireLeader: a member cut off from its cluster ends the watch
	// instead of keeping it open and silent.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	watches := w.layout.Watch(wctx, w.cli, rev+1)
	health := len(watches) - 1 // the verdicts' watch, which a role may not cover
	merged := mergeWatches(wctx, watches)
	for {
		var x watched
		select {
		case <-ctx.Done():
			return false, nil
		case <-lost:
			return false, nil
		case x = <-merged:
		}
		resp := x.resp
		if !x.ok {
			if x.i == health && w.healthRefused {
				continue
			}
			return false, nil
		}
		if err := resp.Err(); err != nil {
			if campaign.Permanent(err) && x.i == health {
				w.healthRefused = true // shown without the verdicts
				continue
			}
			if campaign.Permanent(err) {
				return false, failf("status: watching %s: %v", w.layout.Prefix(), err)
			}
			return resp.CompactRevision != 0, nil
		}
		if !newer(resp.Events, rev) {
			continue
		}
		r, err := w.readAndEmit(ctx)
		if err != nil {
			return false, err
		}
		rev = max(rev, r)
	}
}

// watched is one receive from the i-th of the election's watches; ok is
// false once that watch closed.
type watched struct {
	i    int
	resp clientv3.WatchResponse
	ok   bool
}

// mergeWatches forwards every receive from watches, the close of each
// included, onto one channel, until ctx ends.
func mergeWatches(ctx context.Context, watches []clientv3.WatchChan) <-chan watched {
	merged := make(chan watched)
	for i, ch := range watches {
		go func() {
			for {
				resp, ok := <-ch
				select {
				case merged <- watched{i, resp, ok}:
				case <-ctx.Done():
					return
				}
				if !ok {
					return
				}
			}
		}()
	}
	return merged
}

// newer reports whether an event happened after the read at rev: the
// events up to rev are in what that read printed.
func newer(evs []*clientv3.Event, rev int64) bool {
	for _, ev := range evs {
		if ev.Kv.ModRevision > rev {
			return true
		}
	}
	return false
}

// readAndEmit reads the election and prints it if it changed.
func (w *statusWatch) readAndEmit(ctx context.Context) (int64, error) {
	rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), w.dial)
	defer cancel()
	e, rev, err := campaign.ReadElection(rctx, w.cli, w.layout)
	if err != nil {
		if campaign.Permanent(err) {
			return 0, failf("status: %v", err)
		}
		return 0, err
	}
	return rev, w.emit(electionOf(e, nil), rev)
}

func (w *statusWatch) emit(el electionJSON, rev int64) error {
	state, err := json.Marshal(el)
	if err != nil {
		return failf("status: %v", err)
	}
	if !w.stale && bytes.Equal(state, w.last) {
		return nil
	}
	w.last, w.stale = state, false
	at := w.now().UTC()
	if w.json {
		err = json.NewEncoder(w.out).Encode(watchJSON{electionJSON: el, Time: at.Format(time.RFC3339Nano), Revision: rev})
	} else {
		_, err = fmt.Fprintln(w.out, watchLine(el, rev, at))
	}
	switch {
	case errors.Is(err, syscall.EPIPE):
		// The reader is gone (`| head -1`): the stream has done its job.
		return withCode(exitcode.OK, nil)
	case err != nil:
		return failf("status: %v", err)
	}
	return nil
}

// watchLine is one line of key=value fields after the time, in the order
// docs/operating.md shows: state is leading, waiting-older (the leader waits for
// older terms' leases to end before it starts its command) or no-leader.
func watchLine(el electionJSON, rev int64, at time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s revision=%d", at.Format("2006-01-02T15:04:05.000Z07:00"), rev)
	switch l := el.Leader; {
	case l == nil:
		b.WriteString(" state=no-leader")
	case el.Older > 0:
		fmt.Fprintf(&b, " state=waiting-older leader=%s lease=%s rev=%d", field(l.ID), l.Lease, l.Rev)
	default:
		fmt.Fprintf(&b, " state=leading leader=%s lease=%s rev=%d", field(l.ID), l.Lease, l.Rev)
	}
	if l := el.Leader; l != nil && l.Health != nil {
		fmt.Fprintf(&b, " health=%s", field(l.Health.Status))
	}
	if el.Paused != nil {
		b.WriteString(" paused=true")
	}
	if el.Holders > 1 {
		// The leader above is the first of them.
		fmt.Fprintf(&b, " holders=%d", el.Holders)
		for _, h := range el.Holding {
			fmt.Fprintf(&b, " holder=%s", field(h.ID))
		}
	}
	fmt.Fprintf(&b, " waiting=%d", len(el.Waiting))
	if el.Older > 0 {
		fmt.Fprintf(&b, " older_terms=%d", el.Older)
	}
	if el.Skipped > 0 {
		fmt.Fprintf(&b, " skipped_keys=%d", el.Skipped)
	}
	return b.String()
}

// field is an id as etcd holds it when it is one word of printable
// characters, else quoted with Go's escapes: a space or '=' in an id (which
// --id allows) must not make another field, nor a newline another line.
func field(s string) string {
	if s != "" && oneline.Clean(s) && !strings.ContainsAny(s, " =\"") {
		return s
	}
	return strconv.Quote(s)
}

// connLost signals each time the client's connection leaves READY. The
// client's watch reconnects by itself without a word, so without this a
// stopped etcd would leave the stream silent instead of saying so. It asks
// nothing of etcd: gRPC reports the state it already tracks.
func connLost(ctx context.Context, cli *clientv3.Client) <-chan struct{} {
	conn := cli.ActiveConnection()
	ch := make(chan struct{}, 1)
	go func() {
		s := conn.GetState()
		for conn.WaitForStateChange(ctx, s) {
			next := conn.GetState()
			if s == connectivity.Ready && next != connectivity.Ready {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
			s = next
		}
	}()
	return ch
}

func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// printNotice prints a line on stderr, as a JSON record when the logs are
// JSON, while the command goes on.
func printNotice(app *cli.App, msg string) {
	if json, _ := app.Metadata[metaLogJSON].(bool); json {
		logbuf.Logger(hclog.LoggerOptions{Name: "etcdlead", JSONFormat: true}).Warn(msg)
		return
	}
	fmt.Fprintln(logbuf.Stderr(), "etcdlead: "+msg)
}
