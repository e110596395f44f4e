package main

import (
	"context"
	"errors"
	"fmt"
	"os"
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
}

func newRunner(rc runConfig) (*runner, error) {
	// Caught first, so that a stop signal during the first dial already
	// counts (a `systemctl stop` of a campaigning etcdlead ends it at once).
	sigs := signals.Catch()
	log := newLogger(rc.logLevel, rc.logJSON)
	client, err := newClient(rc.conn)
	if err != nil {
		sigs.Stop()
		return nil, withCode(exitFailure, err)
	}
	camp, err := campaign.New(campaign.Config{
		Client:         client,
		Prefix:         rc.prefix,
		ID:             rc.id,
		TTL:            rc.timing.TTL,
		Guard:          rc.timing.KillTimeout + rc.timing.FenceMargin,
		RequestTimeout: rc.conn.dialTimeout,
		Now:            supervisor.Now,
		Logger:         log.Named("campaign"),
	})
	if err != nil {
		client.Close()
		sigs.Stop()
		return nil, withCode(exitFailure, err)
	}
	return &runner{rc: rc, log: log, client: client, camp: camp, sigs: sigs}, nil
}

func (r *runner) close() {
	r.sigs.Stop()
	r.client.Close()
}

// run is the term loop (DESIGN.md step 10): campaign, lead, and on a lost
// leadership back off and campaign again.
func (r *runner) run(ctx context.Context) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 500 * time.Millisecond
	b.MaxInterval = 15 * time.Second
	b.MaxElapsedTime = 0 // a daemon must outlive any etcd outage
	r.log.Info("starting", "election", r.rc.election, "id", r.rc.id, "ttl", r.rc.timing.TTL,
		"kill_timeout", r.rc.timing.KillTimeout, "fence_margin", r.rc.timing.FenceMargin,
		"outage_tolerance", r.rc.timing.OutageTolerance())
	if !r.rc.killSet && r.rc.timing.KillTimeout != campaign.DefaultKillTimeout {
		r.log.Info("kill timeout shortened to TTL/4 so the fence fits the TTL", "kill_timeout", r.rc.timing.KillTimeout, "ttl", r.rc.timing.TTL)
	}
	for {
		term, err := r.campaign(ctx)
		switch {
		case errors.Is(err, errStopped):
			return nil
		case err != nil && campaign.Permanent(err):
			return failf("%v", err)
		case err != nil && errors.Is(err, campaign.ErrNotLeader):
			return withCode(r.rc.conflictCode, fmt.Errorf("not leader after --wait %s: another candidate leads %s", r.rc.wait, r.rc.prefix))
		case err != nil && r.rc.wait > 0 && errors.Is(err, context.DeadlineExceeded):
			return failf("etcd at %v unreachable for --wait %s: %v", r.rc.conn.endpoints, r.rc.wait, err)
		case err != nil:
			r.log.Warn("campaign failed", "error", err, "endpoints", r.rc.conn.endpoints)
		default:
			started := time.Now()
			done, err := r.lead(term)
			if done {
				return err
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

// pause waits out a backoff; a stop signal ends it.
func (r *runner) pause(d time.Duration) error {
	r.log.Info("backing off", "delay", d)
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
	if r.rc.wait > 0 {
		cctx, cancel = context.WithTimeout(cctx, r.rc.wait)
		defer cancel()
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
			switch signals.Classify(s) {
			case signals.Stop:
				r.log.Info("stop signal while campaigning; exiting", "signal", signals.Name(s.(syscall.Signal)))
				cancel()
				if x := <-res; x.term != nil {
					x.term.Revoke()
				}
				return nil, errStopped
			case signals.Ignore:
				r.log.Info("signal ignored: a stopped supervisor would lose its lease", "signal", signals.Name(s.(syscall.Signal)))
			default:
				r.log.Info("signal ignored: no child runs", "signal", signals.Name(s.(syscall.Signal)))
			}
		}
	}
}

// lead runs the child for one term and ends the term. done says whether
// etcdlead should exit with err (the child's own end, a stop signal, a
// command that cannot run); otherwise leadership was lost and the loop
// campaigns again.
func (r *runner) lead(term *campaign.Term) (done bool, err error) {
	defer term.Revoke() // only after the child's whole group is gone
	child, err := supervisor.Start(supervisor.Spec{
		Path: r.rc.path, Argv: r.rc.argv, Env: childEnv(os.Environ(), r.rc, term),
		KillSignal: r.rc.killSignal, KillTimeout: r.rc.timing.KillTimeout, FenceMargin: r.rc.timing.FenceMargin,
		Deadline: term.Deadline(), LogLevel: r.rc.logLevel, LogJSON: r.rc.logJSON,
	}, r.log.Named("supervisor"))
	var execErr *supervisor.ExecError
	if errors.As(err, &execErr) {
		return true, withCode(execErr.Code, execErr)
	}
	if err != nil {
		return true, failf("%v", err)
	}
	r.log.Info("child started", "pid", child.Pid(), "rev", term.Rev)

	hctx, hcancel := context.WithCancel(context.Background())
	defer hcancel()
	held := make(chan error, 1)
	go func() { held <- term.Hold(hctx, child.SetDeadline) }()

	var lost error
	stopSignal := syscall.Signal(0)
	for {
		select {
		case s := <-r.sigs.C:
			sig := s.(syscall.Signal)
			switch signals.Classify(s) {
			case signals.Stop:
				if stopSignal != 0 {
					r.log.Warn("second stop signal: killing the child's group", "signal", signals.Name(sig))
					child.Kill()
					continue
				}
				stopSignal = sig
				r.log.Info("child stopping", "signal", signals.Name(sig), "kill_timeout", r.rc.timing.KillTimeout)
				child.Stop(sig)
			case signals.Forward:
				r.log.Debug("forwarding signal", "signal", signals.Name(sig))
				child.Signal(sig)
			case signals.Ignore:
				r.log.Info("signal ignored: a stopped supervisor would lose its lease", "signal", signals.Name(sig))
			}
		case err := <-held:
			held = nil
			if stopSignal == 0 && lost == nil {
				lost = err
				r.log.Warn("leadership lost; child stopping", "reason", err, "signal", signals.Name(r.rc.killSignal))
				child.Stop(r.rc.killSignal)
			}
		case <-child.Done():
			hcancel()
			if held != nil {
				<-held
			}
			res := child.Result()
			r.log.Info("child exited", "status", res.Code, "reason", res.Reason)
			return r.outcome(res, stopSignal, lost)
		}
	}
}

func (r *runner) outcome(res supervisor.Result, stopSignal syscall.Signal, lost error) (bool, error) {
	switch {
	case stopSignal != 0:
		return true, withCode(res.Code, nil)
	case res.Reason == supervisor.ReasonFenced:
		r.log.Warn("fence fired: the lease could not be renewed in time")
		return false, nil
	case lost != nil:
		return false, nil
	case res.Reason == supervisor.ReasonKeeperLost:
		return true, failf("the keeper process died; the child's group was killed")
	}
	return true, withCode(res.Code, nil)
}
