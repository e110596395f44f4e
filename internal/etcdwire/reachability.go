package etcdwire

import (
	"context"
	"sync"
	"time"
)

// unanswered is how long a request may go unanswered, when the caller's
// wait ends, before it counts as one that did not reach etcd. Requests on
// a reachable etcd are answered far sooner; the bound only has to keep a
// request sent just before the end from counting.
const unanswered = time.Second

// Reachability remembers whether etcd answered a candidate's last request,
// so that a campaign cut short by its caller can tell "another candidate
// leads" from "etcd did not answer". The zero value is ready to use.
type Reachability struct {
	mu       sync.Mutex
	lastErr  error              // of the last request that ended on its own
	inflight map[*int]time.Time // requests under way, by when they were sent
}

// Begin records a request under way; the returned func records its end.
// A request that ended because ctx ended was not answered in time, so it
// counts as a failure when it was under way for long enough.
func (r *Reachability) Begin() func(ctx context.Context, err error) {
	token := new(int)
	r.mu.Lock()
	if r.inflight == nil {
		r.inflight = map[*int]time.Time{}
	}
	r.inflight[token] = time.Now()
	r.mu.Unlock()
	return func(ctx context.Context, err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		sent := r.inflight[token]
		delete(r.inflight, token)
		if ctx.Err() != nil && err != nil {
			if time.Since(sent) >= unanswered {
				r.lastErr = err
			}
			return
		}
		r.lastErr = err
	}
}

// Failing returns why etcd is taken as unreachable now: the last request
// failed, or one has waited for an answer for too long. Nil otherwise.
func (r *Reachability) Failing() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sent := range r.inflight {
		if time.Since(sent) >= unanswered {
			return context.DeadlineExceeded
		}
	}
	if r.lastErr != nil && !Refused(r.lastErr) {
		return r.lastErr
	}
	return nil
}
