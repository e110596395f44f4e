package runner

import (
	"time"

	"github.com/etcdlead/etcdlead/internal/ops"
	"github.com/etcdlead/etcdlead/signals"
)

// holdAfterExit holds the term of a child that simply ended until
// --hold-at-least has passed since the election (holdRest).
func (l *leading) holdAfterExit() {
	if l.r.holdRest(l.held, l.elected) {
		l.renewing = false
	}
}

// holdRest keeps leadership until --hold-at-least has passed since the
// election, so the same cron job fired a little later on another machine
// finds a leader and does not run again. Losing leadership or a stop signal
// ends the wait. It reports whether Hold has returned (its result was
// taken from held).
func (r *Runner) holdRest(held <-chan error, elected time.Time) bool {
	rest := r.cfg.HoldAtLeast - time.Since(elected)
	if rest <= 0 {
		return false
	}
	r.log.Info("holding leadership (--hold-at-least)", "for", rest.Round(time.Millisecond))
	r.mon.SetRole(ops.RoleHolding)
	t := time.NewTimer(rest)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return false
		case err := <-held:
			r.logTermEnd(err, "while holding")
			return true
		case s := <-r.sigs.C:
			if r.onSignal(s, signals.Holding, nil) == signals.Exit {
				return false
			}
		}
	}
}
