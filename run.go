package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/signals"
	"github.com/etcdlead/etcdlead/supervisor"
)

// stableTerm is how long a term must last for the backoff to start afresh.
const stableTerm = time.Minute

// errStopped is a stop signal received while no child ran: exit 0.
var errStopped = errors.New("stopped by signal")

type runner struct {
	rc     runConfig
	log    hclog.Logger
	client *clientv3.Client
	camp   *campaign.Campaigner
	sigs   *signals.Catcher
	mon    *monitor
	// waitUntil is when --wait ends: fixed at the first attempt of a
	// campaign, not at each retry, and cleared after a term.
	waitUntil time.Time
	standby   standby
	closers   []func()
}

func newRunner(rc runConfig) (*runner, error) {
	// Caught first, so that a stop signal during the first dial already
	// counts (a `systemctl stop` of a campaigning etcdlead ends it at once).
	r := &runner{rc: rc, sigs: signals.Catch(), log: newLogger(rc.logLevel, rc.logJSON)}
	r.closers = append(r.closers, r.sigs.Stop)
	r.mon = newMonitor(rc, sdNotify)
	if rc.statusAddr != "" {
		stop, err := serveStatus(rc.statusAddr, r.mon)
		if err != nil {
			r.close()
			return nil, err
		}
		r.closers = append(r.closers, stop)
	}
	r.closers = append(r.closers, watchdog(r.mon.healthy))
	client, err := newClient(rc.conn)
	if err != nil {
		r.close()
		return nil, err
	}
	r.client = client
	r.closers = append(r.closers, func() { client.Close() })
	r.camp, err = campaign.New(campaign.Config{
		Client:         client,
		Layout:         rc.layout,
		ID:             rc.id,
		TTL:            rc.timing.TTL,
		Guard:          rc.timing.KillTimeout + rc.timing.FenceMargin,
		RequestTimeout: rc.conn.dialTimeout,
		Now:            supervisor.Now,
		Logger:         r.log.Named("campaign"),
		NoWait:         rc.noWait,
		Observer:       r,
	})
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *runner) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.closers = nil
	r.standby.drop()
}

// run is the term loop (docs/design.md, "One term"): campaign, lead, and unless the
// options say to exit, back off and campaign again.
func (r *runner) run(ctx context.Context) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 500 * time.Millisecond
	// Capped low: while it backs off, a candidate is not in the queue, and
	// with every candidate backing off the election has no leader.
	b.MaxInterval = 5 * time.Second
	b.MaxElapsedTime = 0 // a daemon must outlive any etcd outage
	r.log.Info("starting", "election", r.rc.election, "id", r.rc.id, "ttl", r.rc.timing.TTL,
		"kill_timeout", r.rc.timing.KillTimeout, "fence_margin", r.rc.timing.FenceMargin,
		"outage_tolerance", r.rc.timing.OutageTolerance())
	if !r.rc.killSet && r.rc.timing.KillTimeout != campaign.DefaultKillTimeout {
		r.log.Info("kill timeout shortened to TTL/4 so the fence fits the TTL", "kill_timeout", r.rc.timing.KillTimeout, "ttl", r.rc.timing.TTL)
	}
	r.mon.notify("STATUS=connecting to etcd")
	for {
		term, err := r.campaign(ctx)
		if err != nil {
			if done, err := r.campaignFailed(err); done {
				return err
			}
		} else {
			r.waitUntil = time.Time{}
			started := time.Now()
			end := r.lead(term)
			if end.exit {
				return end.err
			}
			if time.Since(started) > stableTerm {
				b.Reset()
			}
		}
		if err := r.pause(b.NextBackOff()); err != nil {
			return nil
		}
	}
}

// campaignFailed decides whether a failed campaign ends etcdlead.
func (r *runner) campaignFailed(err error) (bool, error) {
	switch {
	case errors.Is(err, errStopped):
		return true, nil
	case campaign.Permanent(err):
		return true, failf("%v", err)
	case errors.Is(err, campaign.ErrNotLeader):
		opt := "--no-wait"
		if !r.rc.noWait {
			opt = "--wait " + r.rc.wait.String()
		}
		r.log.Info("not leader; giving up", "option", opt, "exit_code", r.rc.conflictCode)
		return true, withCode(r.rc.conflictCode, fmt.Errorf("not leader (%s): another candidate leads %s", opt, r.rc.layout.Prefix()))
	case r.rc.noWait:
		return true, failf("etcd at %v not reached within --dial-timeout %s (--no-wait): %v", r.rc.conn.endpoints, r.rc.conn.dialTimeout, err)
	case errors.Is(err, campaign.ErrUnreachable), r.rc.wait > 0 && !time.Now().Before(r.waitUntil):
		return true, failf("etcd at %v unreachable for --wait %s: %v", r.rc.conn.endpoints, r.rc.wait, err)
	case errors.Is(err, campaign.ErrResigned):
		r.log.Info("stepped down on request before leading; campaigning again")
		return false, nil
	}
	r.log.Warn("campaign failed", "error", err, "endpoints", r.rc.conn.endpoints)
	return false, nil
}

// pause waits out a backoff; a stop signal ends it.
func (r *runner) pause(d time.Duration) error {
	r.log.Info("backing off", "delay", d)
	r.mon.setRole(roleBackingOff)
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return nil
		case s := <-r.sigs.C:
			if signals.Classify(s) == signals.Stop {
				r.log.Info("stop signal while backing off; exiting", "signal", signals.Name(s.(syscall.Signal)))
				return errStopped
			}
			r.log.Info("signal ignored: no child runs", "signal", signals.Name(s.(syscall.Signal)))
		}
	}
}

type campaignResult struct {
	term *campaign.Term
	err  error
}

// campaign runs one campaign while answering signals: a stop signal ends it
// and the campaign revokes its lease on the way out.
func (r *runner) campaign(ctx context.Context) (*campaign.Term, error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	switch {
	case r.rc.wait > 0:
		if r.waitUntil.IsZero() {
			r.waitUntil = time.Now().Add(r.rc.wait)
		}
		cctx, cancel = context.WithDeadline(cctx, r.waitUntil)
		defer cancel()
	case r.rc.noWait:
		// One attempt, bounded like every attempt by --dial-timeout.
		cctx, cancel = context.WithTimeout(cctx, r.rc.conn.dialTimeout)
		defer cancel()
	}
	if !r.rc.noWait {
		r.prepare() // warms up while etcd is dialled
	}
	res := make(chan campaignResult, 1)
	go func() {
		t, err := r.camp.Campaign(cctx)
		res <- campaignResult{t, err}
	}()
	for {
		select {
		case x := <-res:
			return x.term, x.err
		case s := <-r.sigs.C:
			sig := s.(syscall.Signal)
			switch signals.Classify(s) {
			case signals.Stop:
				r.log.Info("stop signal while campaigning; exiting", "signal", signals.Name(sig))
				r.mon.setRole(roleStopping)
				cancel()
				if x := <-res; x.term != nil {
					x.term.Revoke()
				}
				return nil, errStopped
			case signals.Ignore:
				r.log.Info("signal ignored: a stopped supervisor would lose its lease", "signal", signals.Name(sig))
			default:
				r.log.Info("signal ignored: no child runs", "signal", signals.Name(sig))
			}
		}
	}
}
