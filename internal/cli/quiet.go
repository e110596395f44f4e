package cli

import (
	"io"
	"sync"

	"github.com/etcdlead/etcdlead/internal/logbuf"
	"github.com/etcdlead/etcdlead/internal/runner"
)

// heldLimit bounds the lines kept back; past it they are written after
// all, so a long wait cannot grow memory without bound.
const heldLimit = 64 << 10

// heldLog keeps a run's log lines back until its outcome is known, for a
// candidate whose loss the user declared no error (--conflict-exit-code=0
// with --no-wait or --wait). cron mails whatever a job writes, and with
// the same line on many machines every loser would write on every firing.
// Once a term is won, or the run ends in any other way, the lines are
// written as they were logged; a silent loss drops them.
type heldLog struct {
	out io.Writer // non-blocking (logbuf), so holding mu while writing is brief

	mu      sync.Mutex
	held    [][]byte
	size    int
	passing bool
}

// holdLog returns the writer for a run's logs: a heldLog when a loss is
// silent and the level is the default or quieter, else nil (write on).
func holdLog(rc runConfig) *heldLog {
	silentLoss := rc.conflictCode == 0 && (rc.noWait || rc.wait > 0)
	if !silentLoss || rc.logLevel == "trace" || rc.logLevel == "debug" {
		return nil
	}
	return &heldLog{out: logbuf.Stderr()}
}

func (h *heldLog) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.passing && h.size+len(p) > heldLimit {
		h.releaseLocked(true)
	}
	if h.passing {
		return h.out.Write(p)
	}
	h.held = append(h.held, append([]byte(nil), p...))
	h.size += len(p)
	return len(p), nil
}

// release writes the lines kept back, or drops them when keep is false,
// and lets later lines through.
func (h *heldLog) release(keep bool) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.releaseLocked(keep)
}

func (h *heldLog) releaseLocked(keep bool) {
	for _, l := range h.held {
		if keep {
			_, _ = h.out.Write(l)
		}
	}
	h.held, h.size, h.passing = nil, 0, true
}

// won is runner.Config.Won: a won term can no longer end in a loss before
// a child ran.
func (h *heldLog) won() { h.release(true) }

// silentLoss reports whether o is a loss the user declared no error.
func silentLoss(o *runner.Outcome, conflictCode int) bool {
	return o.Kind == runner.NotLeader && conflictCode == 0
}
