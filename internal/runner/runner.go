package runner

import (
	"context"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/ops"
	"github.com/etcdlead/etcdlead/signals"
	"github.com/etcdlead/etcdlead/supervisor"
)

// Config is what the loop needs of `etcdlead run`'s options, validated.
type Config struct {
	// Campaign is the candidate's campaign as package campaign is given it
	// (campaign.New), so that an option the loop reads too is not kept
	// twice: the loop reads its Layout, ID, Timing, NoWait, Holders
	// (1 or 0 for one leader), RunID ("" for none) and RequestTimeout,
	// which bounds a --no-wait attempt. Its Client, Logger and Observer
	// exist only once the run begins; the loop never reads them, as it
	// campaigns through a Campaigner.
	Campaign campaign.Config
	// Spec is the children's, as the keepers are given it (NewStandby);
	// the loop reads its KillSignal, which asks the child to stop.
	Spec        supervisor.Spec
	Wait        time.Duration // 0: for ever
	Once        bool
	HoldAtLeast time.Duration
	Timeout     time.Duration // 0: none
	Restart     Restart
	// RunRetry: a term whose child did not exit 0 takes back its record
	// of the run id (--run-id-retry), so the firing may run again.
	RunRetry  bool
	Endpoints []string // for messages and the child's environment
	// Interactive: stdin is this process's controlling terminal, whose
	// foreground the child gets, so Ctrl-C reaches the child alone.
	Interactive bool
	// Health checks the command while it runs (--health-*); nil for none.
	Health *HealthCheck
	// Eligible decides whether this candidate may queue and lead
	// (--eligible-cmd); nil for none.
	Eligible *Check
	// Notify is told of each change of role (--notify); nil for none.
	Notify *Notify
	// Won, if set, is called when a term is won, before its child starts:
	// from then on the run can no longer end as NotLeader before a child
	// ran.
	Won func()
}

// Restart is --restart: whether a child that exited by itself is followed
// by another campaign.
type Restart string

const (
	RestartNever     Restart = "never"
	RestartOnFailure Restart = "on-failure"
	RestartAlways    Restart = "always"
)

// Leadership is what the loop needs of a won term (a *campaign.Term, see
// Campaigns).
type Leadership interface {
	// ID names the term.
	ID() TermID
	// Deadline is the boot-clock time before which etcd cannot expire
	// the lease.
	Deadline() time.Duration
	// Lead keeps the term until it is lost or ctx ends, calling onRenew
	// with a new deadline when the keeper should hear it, not at every
	// renewal (campaign.Term.Lead says when); it returns only once it has
	// stopped.
	Lead(ctx context.Context, onRenew func(deadline time.Duration)) error
	// End ends the term in etcd, which wakes the next candidate; a
	// renewal may still follow.
	End()
	// Revoke ends the term, unless End did, and revokes its lease.
	Revoke()
	// ForgetRun takes back the term's record of its run id, if any
	// (campaign.Term.ForgetRun).
	ForgetRun()
	// Waiting reports whether a candidate waits behind the term.
	Waiting(ctx context.Context) (bool, error)
	// RecordHealth writes the command's health verdict to etcd, for
	// etcdlead status.
	RecordHealth(ctx context.Context, status string) error
}

// TermID names a won term: its key, revision and lease.
type TermID struct {
	Key   string
	Rev   int64
	Lease int64
	// Slot and SlotRev are the term's slot and its fencing token
	// (campaign.Term); 0 and Rev with one holder.
	Slot    int
	SlotRev int64
}

// Campaigner wins terms.
type Campaigner interface {
	// Campaign returns a term that may start its child, or an error from
	// package campaign (ErrNotLeader, ErrResigned, a permanent refusal...).
	Campaign(ctx context.Context) (Leadership, error)
	// AwaitVacant returns nil once the election has no candidate.
	AwaitVacant(ctx context.Context) error
	// Ping asks etcd a small question, to learn that it answers.
	Ping(ctx context.Context) error
}

// Keepers starts children, each under a keeper of its own (package
// supervisor), and may keep one keeper ready ahead of need.
type Keepers interface {
	// Prepare readies a keeper for the next term unless one is ready.
	Prepare()
	// Drop ends the ready keeper, if any.
	Drop()
	// Start starts the child with the term's fence deadline and
	// environment, under the ready keeper if there is one.
	Start(deadline time.Duration, env []string) (Child, error)
}

// Child is a started child under its keeper (a *supervisor.Child).
type Child interface {
	Pid() int
	// Done is closed once the child's processes are gone; Gone after
	// that, once its keeper is gone too.
	Done() <-chan struct{}
	Gone() <-chan struct{}
	Result() supervisor.Result
	SetDeadline(d time.Duration)
	Stop(sig syscall.Signal)
	Kill()
	Signal(sig syscall.Signal)
}

// Runner runs terms until the run ends.
type Runner struct {
	cfg     Config
	camp    Campaigner
	keepers Keepers
	sigs    *signals.Catcher
	mon     *ops.Monitor
	log     hclog.Logger
	// waitUntil is when --wait ends: fixed at the first attempt of a
	// campaign, not at each retry, and cleared after a term.
	waitUntil time.Time
	// resigned: the last campaign or term ended on a resign request or
	// the election's pause, so the next campaign follows at once, without
	// a backoff.
	resigned bool
	// unhealthy: the last term stepped down for its command's health, so
	// the candidate sits out before it queues again (sitOutSick).
	unhealthy bool
	// lost: the last term, leading or waiting, was taken from the
	// candidate (a fence, its keys or lease gone), which is no failure of
	// its own: the backoff starts afresh (newBackoff).
	lost bool
	// sick and restarts damp the health check's step-downs and restarts
	// in place; lastUnhealthy is the last unhealthy verdict.
	sick, restarts *backoff.ExponentialBackOff
	lastUnhealthy  time.Time
	// notes tells --notify's command of each change of role; nil without
	// one.
	notes *notifier
}

// New returns a runner. sigs must catch signals before anything is
// started, so that none is lost.
func New(cfg Config, camp Campaigner, keepers Keepers, sigs *signals.Catcher, mon *ops.Monitor, log hclog.Logger) *Runner {
	r := &Runner{cfg: cfg, camp: camp, keepers: keepers, sigs: sigs, mon: mon, log: log}
	if h := cfg.Health; h != nil {
		r.restarts = newDamping(h.Interval, restartMax)
		r.sick = newDamping(h.Interval*time.Duration(max(1, h.Retries)), sickMax)
	}
	return r
}

// Campaigns adapts a campaign.Campaigner.
func Campaigns(c *campaign.Campaigner) Campaigner { return campaigner{c} }

type campaigner struct{ c *campaign.Campaigner }

func (c campaigner) Campaign(ctx context.Context) (Leadership, error) {
	t, err := c.c.Campaign(ctx)
	if t == nil {
		return nil, err
	}
	return wonTerm{t}, err
}

func (c campaigner) AwaitVacant(ctx context.Context) error { return c.c.AwaitVacant(ctx) }
func (c campaigner) Ping(ctx context.Context) error        { return c.c.Ping(ctx) }

// wonTerm adapts a *campaign.Term: its Deadline, Lead, Revoke, ForgetRun
// and Waiting are the term's own.
type wonTerm struct{ *campaign.Term }

func (t wonTerm) ID() TermID {
	return TermID{Key: t.Key, Rev: t.Rev, Lease: int64(t.Lease), Slot: t.Slot, SlotRev: t.SlotRev}
}

func (t wonTerm) RecordHealth(ctx context.Context, status string) error {
	return t.Term.RecordHealth(ctx, campaign.HealthRecord{Status: status, At: time.Now().UTC()})
}

// Observer passes the campaign's events on: to the monitor, and to the
// keepers, which get a keeper ready once the campaign is next in line and
// drop it while it is far back.
func Observer(mon *ops.Monitor, k Keepers) campaign.Observer {
	return observer{mon, k}
}

type observer struct {
	mon *ops.Monitor
	k   Keepers
}

func (o observer) Front(string) { o.k.Prepare() }

// standbyAhead: a candidate keeps its ready keeper while at most this many
// terms are ahead of it (see Standby).
const standbyAhead = 2

func (o observer) Queued(key string, ahead int) {
	o.mon.Queued(key)
	if ahead > standbyAhead {
		o.k.Drop()
	}
}

func (o observer) Renewed(latency time.Duration, err error) { o.mon.Renewed(latency, err) }
func (o observer) BarrierWait()                             { o.mon.BarrierWait() }

// Paused: no keeper is kept ready while the election is paused.
func (o observer) Paused() {
	o.mon.Paused()
	o.k.Drop()
}
