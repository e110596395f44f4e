package runner

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/supervisor"
)

// Standby is Keepers on package supervisor. It holds a keeper started ahead
// of need, so that winning costs a pipe message rather than an exec of a
// keeper (process start and package initialisation on the handoff path).
// A keeper carries nothing of a term until it is started, so one serves any
// term. A campaign starts one at once, so that it warms up while etcd is
// asked (the first one as soon as containment is chosen: runAction). A
// candidate keeps it when at most two terms are ahead of it, and otherwise
// drops it until a read shows it next in line: its wait watches
// only the term just ahead, so a candidate two places back learns nothing
// when the leader leaves, and would find itself next with no keeper ready;
// further back, a long queue does not pay for idle keepers.
type Standby struct {
	spec   supervisor.Spec // without the term's deadline and environment
	log    hclog.Logger
	launch func(supervisor.Spec, hclog.Logger) (*supervisor.Pending, error)

	mu       sync.Mutex
	pending  *supervisor.Pending
	starting bool       // a keeper is being started (Prepare)
	started  *sync.Cond // on mu: starting became false
}

// NewStandby returns the keepers of children started from spec, whose Env
// is the environment every term's child inherits.
func NewStandby(spec supervisor.Spec, log hclog.Logger) *Standby {
	s := &Standby{spec: spec, log: log, launch: supervisor.Prepare}
	s.started = sync.NewCond(&s.mu)
	return s
}

// Prepare starts a standby keeper unless one waits or is starting. It
// returns at once: the fork goes on beside the caller, which is the
// campaign or its first request, and take waits for it.
func (s *Standby) Prepare() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending != nil || s.starting {
		return
	}
	s.starting = true
	go func() {
		p, err := s.launch(s.spec, s.log)
		if err != nil {
			s.log.Debug("no standby keeper; starting one when elected", "error", err)
		} else {
			s.log.Trace("standby keeper started")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.pending, s.starting = p, false
		s.started.Broadcast()
	}()
}

// take hands over the standby keeper, if any, once a start under way has
// ended.
func (s *Standby) take() *supervisor.Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.starting {
		s.started.Wait()
	}
	p := s.pending
	s.pending = nil
	return p
}

// Drop ends the standby keeper, if any.
func (s *Standby) Drop() {
	if p := s.take(); p != nil {
		p.Cancel()
	}
}

// Start starts the child under the standby keeper if one waits, else under
// a fresh keeper.
func (s *Standby) Start(deadline time.Duration, env []string) (Child, error) {
	var c *supervisor.Child
	var err error
	if p := s.take(); p != nil {
		c, err = p.Start(deadline, env, s.log)
	} else {
		spec := s.spec
		spec.Env = append(append([]string(nil), spec.Env...), env...)
		spec.Deadline = deadline
		c, err = supervisor.Start(spec, s.log)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}
