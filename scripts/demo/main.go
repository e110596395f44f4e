// Command demo shows etcdlead at work: three candidates, one etcd, a
// graceful handover and a crash. Run it from the repository with
//
//	go run ./scripts/demo
//
// It needs nothing but Go: etcd runs inside the demo, and the worker that
// each leader runs is the demo binary itself.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(worker())
	}
	// A closed stdout (| head, or a tee that a Ctrl-C ended first) must not
	// kill the demo before it has cleaned up.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first Ctrl-C the demo cleans up; a second one ends it at
	// once, and the candidates' death signal still stops them.
	context.AfterFunc(ctx, stop)
	con := &console{out: os.Stdout, start: time.Now()}
	sum, err := run(ctx, con)
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case interrupted && err != nil && !errors.Is(err, context.Canceled):
		fmt.Fprintf(os.Stderr, "demo: interrupted, and cleaning up failed: %v\n", err)
		os.Exit(1)
	case interrupted:
		fmt.Fprintln(os.Stderr, "demo: interrupted; every process it started has stopped and its temp dir is removed")
		os.Exit(130)
	case err != nil:
		fmt.Fprintf(os.Stderr, "demo: FAILED: %v\n", err)
		os.Exit(1)
	}
	sum.print(con)
}

type summary struct {
	leaders       []seat
	termTakeover  time.Duration
	crashTakeover time.Duration
}

func (s summary) print(con *console) {
	con.say("summary ------------------------------------------------------------")
	for i, l := range s.leaders {
		con.say("  leader %d: %s", i+1, l)
	}
	con.say("  takeover after SIGTERM of the leader: %v", s.termTakeover)
	con.say("  takeover after kill -9 of the leader: %v (lease TTL 2s)", s.crashTakeover)
	con.say("  all candidates, workers and etcd stopped; temp dir removed")
}

// run is the whole scenario. Its deferred steps undo what it started, in
// reverse order, whether it succeeds, fails or is interrupted.
func run(ctx context.Context, con *console) (sum summary, err error) {
	dir, err := os.MkdirTemp("", "etcdlead-demo-")
	if err != nil {
		return sum, err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()

	root, err := moduleRoot(ctx)
	if err != nil {
		return sum, err
	}
	con.say("building etcdlead and its keeper: go build -o %s/ . ./cmd/etcdlead-keeper (in %s)", dir, root)
	built := time.Now()
	bin, err := buildEtcdlead(ctx, con, root, dir)
	if err != nil {
		return sum, err
	}
	con.say("built in %v", time.Since(built).Round(100*time.Millisecond))

	stopEtcd, endpoint, err := startEtcd(ctx, con, dir)
	if err != nil {
		return sum, err
	}
	defer stopEtcd()
	con.say("etcd is up at %s (embedded in the demo, single member)", endpoint)
	cli, err := newClient(endpoint)
	if err != nil {
		return sum, err
	}
	defer cli.Close()

	ev := newEvents()
	var cands []*candidate
	defer func() { err = errors.Join(err, stopAll(cands)) }()
	start := func(id string, ready eventKind, what string) (*candidate, error) {
		con.say("starting %s: etcdlead run --endpoints=%s --election=demo --ttl=2s --id=%s -- demo worker", id, endpoint, id)
		c, err := startCandidate(con, ev, bin, endpoint, id)
		if err != nil {
			return nil, err
		}
		cands = append(cands, c)
		_, err = ev.wait(ctx, 15*time.Second, what, func(e event) bool { return e.c == c && e.kind == ready })
		return c, err
	}
	if _, err := start("candidate-1", workerLine, "worker output from candidate-1"); err != nil {
		return sum, err
	}
	for _, id := range []string{"candidate-2", "candidate-3"} {
		if _, err := start(id, queued, id+" queueing behind the leader"); err != nil {
			return sum, err
		}
	}
	leader, err := whoLeads(ctx, con, cli, cands)
	if err != nil {
		return sum, err
	}
	sum.leaders = append(sum.leaders, leader)
	if err := sleep(ctx, 4*time.Second); err != nil {
		return sum, err
	}

	old := find(cands, leader.id)
	con.say("sending SIGTERM to %s's etcdlead (pid %d): it stops its worker, revokes its lease and so hands over at once", old.id, old.pid())
	sum.termTakeover, leader, err = failover(ctx, con, cli, ev, cands, old, old.terminate)
	if err != nil {
		return sum, err
	}
	sum.leaders = append(sum.leaders, leader)
	if err := old.wait(10 * time.Second); err != nil {
		return sum, err
	}
	if old.err != nil {
		return sum, fmt.Errorf("%s exited with %v after SIGTERM, want status 0 (its worker's)", old.id, old.err)
	}
	con.say("%s exited with status 0, its worker's status", old.id)
	if err := sleep(ctx, 3*time.Second); err != nil {
		return sum, err
	}

	old = find(cands, leader.id)
	con.say("kill -9 of %s's etcdlead (pid %d), as a crash would: it cannot revoke its lease", old.id, old.pid())
	sum.crashTakeover, leader, err = failover(ctx, con, cli, ev, cands, old, func() {
		old.kill()
		if q, err := electionQueue(ctx, cli); err == nil {
			con.say("etcd right after the kill: %s: the dead leader's key lives as long as its lease", describe(q))
		}
	})
	if err != nil {
		return sum, err
	}
	sum.leaders = append(sum.leaders, leader)
	con.say("that took about the TTL: with nobody to revoke the dead leader's lease, etcd had to let its 2s run out first")
	if err := old.wait(10 * time.Second); err != nil {
		return sum, err
	}
	if err := sleep(ctx, 3*time.Second); err != nil {
		return sum, err
	}

	con.say("sending SIGTERM to every candidate still running")
	if err := stopAll(cands); err != nil {
		return sum, err
	}
	for _, c := range cands {
		if c != old && c.err != nil {
			return sum, fmt.Errorf("%s exited with %v after SIGTERM, want status 0", c.id, c.err)
		}
	}
	con.say("all candidates exited with status 0; stopping etcd")
	return sum, nil
}

// failover does act to the leader, waits for another candidate's worker to
// speak, and checks that etcd agrees on who leads now.
func failover(ctx context.Context, con *console, cli *clientv3.Client, ev *events, cands []*candidate, old *candidate, act func()) (time.Duration, seat, error) {
	acted := time.Now()
	act()
	e, err := ev.wait(ctx, 15*time.Second, "new leader after "+old.id, func(e event) bool {
		return e.kind == workerLine && e.c != old && e.at.After(acted)
	})
	if err != nil {
		return 0, seat{}, err
	}
	took := e.at.Sub(acted).Round(time.Millisecond)
	con.say("takeover: %s's worker started %v after the signal, with fencing token rev=%d", e.c.id, took, e.rev)
	leader, err := whoLeads(ctx, con, cli, cands)
	if err != nil {
		return 0, seat{}, err
	}
	if leader.id != e.c.id || leader.rev != e.rev {
		return 0, seat{}, fmt.Errorf("etcd names %s as leader, but %s's worker runs with rev %d", leader, e.c.id, e.rev)
	}
	return took, leader, nil
}

func whoLeads(ctx context.Context, con *console, cli *clientv3.Client, cands []*candidate) (seat, error) {
	q, err := electionQueue(ctx, cli)
	if err != nil {
		return seat{}, err
	}
	con.say("etcd says: %s", describe(q))
	if len(q) == 0 || find(cands, q[0].id) == nil {
		return seat{}, fmt.Errorf("etcd shows no known leader: %s", describe(q))
	}
	return q[0], nil
}

func find(cands []*candidate, id string) *candidate {
	for _, c := range cands {
		if c.id == id {
			return c
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
