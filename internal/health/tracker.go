package health

import (
	"context"
	"time"
)

// Status is a health check's verdict, with Docker's names.
type Status int

const (
	Starting  Status = iota // no check has passed yet, and too few have failed to say
	Healthy                 // the last check passed
	Unhealthy               // Retries checks in a row failed
)

func (s Status) String() string {
	switch s {
	case Healthy:
		return "healthy"
	case Unhealthy:
		return "unhealthy"
	}
	return "starting"
}

// Tracker turns check results into a Status by Docker HEALTHCHECK's rules:
// a failure within StartPeriod of Begin does not count, unless a check has
// passed since Begin; Retries failures in a row that count make the status
// unhealthy; a pass makes it healthy at once.
type Tracker struct {
	Retries     int
	StartPeriod time.Duration

	begun   time.Time
	passed  bool
	failing int
	status  Status
	last    Result
	seen    bool
}

// NewTracker returns a tracker whose start period begins at begin.
func NewTracker(retries int, startPeriod time.Duration, begin time.Time) *Tracker {
	return &Tracker{Retries: max(1, retries), StartPeriod: startPeriod, begun: begin}
}

// Observe adds r and returns the status after it.
func (t *Tracker) Observe(r Result) Status {
	t.last, t.seen = r, true
	switch {
	case r.OK:
		t.passed, t.failing, t.status = true, 0, Healthy
	case !t.passed && r.At.Sub(t.begun) < t.StartPeriod:
		// Still starting: the failure does not count.
	default:
		t.failing++
		if t.failing >= t.Retries {
			t.status = Unhealthy
		}
	}
	return t.status
}

// Status is the status now, and Failing the failures in a row that count.
func (t *Tracker) Status() Status { return t.status }
func (t *Tracker) Failing() int   { return t.failing }

// Last is the last result observed, and whether there was one.
func (t *Tracker) Last() (Result, bool) { return t.last, t.seen }

// Loop runs p every interval, the first time interval after it is called,
// and hands each result to each, from Loop's goroutine, until ctx ends. A
// check takes its time: the next starts interval after the last one
// ended. deadline gives the fence deadline of each check. Loop returns
// only once the check under way, if any, has ended with every process it
// started.
func Loop(ctx context.Context, p Probe, interval time.Duration, deadline func() time.Duration, each func(Result)) {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r := p.Check(ctx, deadline)
		if ctx.Err() != nil {
			return
		}
		each(r)
		t.Reset(interval)
	}
}
