package cli

import (
	"io"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/internal/logbuf"
	"github.com/etcdlead/etcdlead/internal/runner"
)

// deferredLimit bounds the lines kept back; past it they are written after
// all, so a long wait cannot grow memory without bound.
const deferredLimit = 64 << 10

// deferredLog keeps a run's log lines back until its outcome is known, for
// a candidate whose loss the user declared no error (--conflict-exit-code=0
// with --no-wait or --wait). cron mails whatever a job writes, and with
// the same line on many machines every loser would write on every firing.
// Once a term is won, or the run ends in any other way, the lines are
// written as they were logged; a silent loss drops them.
//
// A --once run of that kind is a scheduled job (README.md's cron line), and
// its winner is held to the same rule as its losers: its lines wait for the
// end of the run and are written only when it fails (any exit code but 0),
// so a successful firing mails nothing and a failed one mails the whole
// story, the child's status included. A warning or an error is written when
// it happens, with what was kept before it: it is news to whoever watches
// the run, and worth a mail even when the job then succeeds. On a terminal
// the winner's lines are written as they come: someone is watching.
type deferredLog struct {
	out      io.Writer // non-blocking (logbuf), so writing under mu is brief
	untilEnd bool      // a won term does not release the lines; the exit code does

	mu      sync.Mutex
	kept    [][]byte
	size    int
	passing bool
}

// newDeferredLog returns the writer for a run's logs: a deferredLog when a
// loss is silent and the level is the default or quieter, else nil (write
// on). live tells that stderr is a terminal.
func newDeferredLog(rc runConfig, live bool) *deferredLog {
	silentLoss := rc.conflictCode == 0 && (rc.run.Campaign.NoWait || rc.run.Wait > 0)
	if !silentLoss || rc.run.Spec.LogLevel == "trace" || rc.run.Spec.LogLevel == "debug" {
		return nil
	}
	return &deferredLog{out: logbuf.Stderr(), untilEnd: rc.run.Once && !live}
}

func (d *deferredLog) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.passing && d.size+len(p) > deferredLimit {
		d.releaseLocked(true)
	}
	if d.passing {
		return d.out.Write(p)
	}
	d.kept = append(d.kept, append([]byte(nil), p...))
	d.size += len(p)
	return len(p), nil
}

// LevelWrite is hclog's way of saying how severe a line is
// (hclog.LevelWriter).
func (d *deferredLog) LevelWrite(level hclog.Level, p []byte) (int, error) {
	if level >= hclog.Warn && d.untilEnd {
		d.release(true)
	}
	return d.Write(p)
}

// release writes the lines kept back, or drops them when keep is false,
// and lets later lines through.
func (d *deferredLog) release(keep bool) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.releaseLocked(keep)
}

func (d *deferredLog) releaseLocked(keep bool) {
	for _, l := range d.kept {
		if keep {
			_, _ = d.out.Write(l)
		}
	}
	d.kept, d.size, d.passing = nil, 0, true
}

// won is runner.Config.Won: a won term can no longer end in a loss before
// a child ran.
func (d *deferredLog) won() {
	if d != nil && !d.untilEnd {
		d.release(true)
	}
}

// end releases the lines at the run's end: dropped after a silent loss
// and, for a --once run kept back to its end, after any success.
func (d *deferredLog) end(e *runEnd) {
	if d != nil && d.untilEnd {
		d.release(exitCode(e) != exitcode.OK)
		return
	}
	d.release(!silentLoss(e.Outcome, e.conflictCode))
}

// silentLoss reports whether o is a loss the user declared no error.
func silentLoss(o *runner.Outcome, conflictCode int) bool {
	return o.Kind == runner.NotLeader && conflictCode == 0
}
