package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ---- one handoff, step by step ------------------------------------------
//
// A separate pass from the headline gap, so that the marks' cost never
// enters it: etcdlead candidates run with ETCDLEAD_TRACE (internal/trace),
// and each etcdctl lock candidate talks to etcd through a timestamping proxy
// of its own (proxy.go). Both are joined per handoff by the processes that
// took part and by the window from the first stamp to the new child's first
// instruction.

// stepRow is one step of a handoff path.
type stepRow struct {
	Name string
	Who  string // the process the stamp comes from, as printed
	// From lists the rows this step is counted from (the latest of those
	// present); nil means the row just above.
	From []int
	// OffPath rows are not on the way to the next child (an answer nobody
	// waits for before it starts).
	OffPath bool
	// Unsplit says what happens inside this step that no stamp separates.
	Unsplit string
	role    string // etcdlead: whose marks (old, oldk, next, nextk)
	event   string // etcdlead: the mark's event
	// wire, for an etcdlead row seen at its candidates' proxies: the
	// row's time from their frames and the rows above, 0 if not seen.
	wire func(r tracedRound, ts []int64) int64
}

// stepTable is one path's rows and, per handoff, each row's time on the
// bench's clock (0: not seen).
type stepTable struct {
	Title string
	Unit  string // what a column of times is; "" means handoffs
	rows  []stepRow
	times [][]int64
	gaps  sample // the traced pass's own gaps, first row to last
}

// stat is a row's step (from its From rows) and its time from the first
// row, over the handoffs where both are known.
func (s *stepTable) stat(i int) (step, at sample) {
	r := s.rows[i]
	for _, ts := range s.times {
		if ts[i] == 0 || ts[0] == 0 {
			continue
		}
		at = append(at, time.Duration(ts[i]-ts[0]))
		if i == 0 {
			continue
		}
		from := r.From
		if from == nil {
			from = []int{s.prev(i)}
		}
		var ref int64
		for _, f := range from {
			ref = max(ref, ts[f])
		}
		if ref != 0 {
			step = append(step, time.Duration(ts[i]-ref))
		}
	}
	return step, at
}

// prev is the nearest row above i on the path.
func (s *stepTable) prev(i int) int {
	for j := i - 1; j > 0; j-- {
		if !s.rows[j].OffPath {
			return j
		}
	}
	return 0
}

// mark is one line of the trace file.
type mark struct {
	t     int64
	pid   int
	event string
}

// readMarks reads the trace file, grouped by pid in time order.
func readMarks(path string) (map[int][]mark, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return map[int][]mark{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[int][]mark{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// <ns> <pid> <the log line's message> (internal/trace)
		fl := strings.SplitN(sc.Text(), " ", 3)
		if len(fl) < 3 {
			continue
		}
		t, err1 := strconv.ParseInt(fl[0], 10, 64)
		pid, err2 := strconv.Atoi(fl[1])
		if err1 != nil || err2 != nil {
			continue
		}
		out[pid] = append(out[pid], mark{t: t, pid: pid, event: fl[2]})
	}
	for _, ms := range out {
		sort.Slice(ms, func(i, j int) bool { return ms[i].t < ms[j].t })
	}
	return out, sc.Err()
}

// tracedRound is one traced handoff before its marks are read.
type tracedRound struct {
	start, end int64          // first row's and last row's stamps
	pids       map[string]int // etcdlead: role → pid
	ids        [2]string      // the old and the next candidate
	old, next  *stampProxy    // etcdctl lock: the two candidates' proxies
}

// fill sets each row's time from the marks: the first mark of the row's
// process and event inside the round's window. The window's end leaves room
// for answers off the path that arrive after the new child started.
func (s *stepTable) fill(rounds []tracedRound, marks map[int][]mark) {
	for _, r := range rounds {
		ts := make([]int64, len(s.rows))
		ts[0], ts[len(ts)-1] = r.start, r.end
		for i, row := range s.rows[1 : len(s.rows)-1] {
			for _, m := range marks[r.pids[row.role]] {
				if row.event != "" && m.t >= r.start && m.t <= r.end+int64(50*time.Millisecond) && m.event == row.event {
					ts[i+1] = m.t
					break
				}
			}
		}
		// Wire rows come from the marks around them, so after all marks.
		for i, row := range s.rows {
			if row.wire != nil && r.old != nil && r.next != nil {
				ts[i] = row.wire(r, ts)
			}
		}
		s.times = append(s.times, ts)
		s.gaps = append(s.gaps, time.Duration(r.end-r.start))
	}
}

const (
	wakeUnsplit   = "etcd's commit (a WAL fsync) and the event's way to the watcher"
	notSplitExit  = "the child's end, the kernel's SIGCHLD and etcdctl's wait4 return, then Mutex.Unlock's call"
	notSplitStart = "etcdctl's return from Mutex.Lock, fork and exec of the child, the child's runtime start"
)

func etcdleadRows(deleted bool) []stepRow {
	var rows []stepRow
	if deleted {
		rows = []stepRow{
			{Name: "the leader's queue key deleted (request sent)", Who: "bench"},
			{Name: "the old supervisor's guard sees the delete (watch event)", Who: "old supervisor", role: "old", event: "key deleted", Unsplit: wakeUnsplit},
			{Name: "its term loop sends the stop to the keeper", Who: "old supervisor", role: "old", event: "stop sent to keeper"},
			{Name: "the old keeper reads the stop (then signals the group)", Who: "old keeper", role: "oldk", event: "stop received"},
			{Name: "the old keeper reaps the child (wait4 returns)", Who: "old keeper", role: "oldk", event: "child reaped"},
		}
	} else {
		rows = []stepRow{
			{Name: "the old child's last instruction", Who: "old child"},
			{Name: "the old keeper reaps it (wait4 returns)", Who: "old keeper", role: "oldk", event: "child reaped"},
		}
	}
	rows = append(rows,
		stepRow{Name: "the old keeper writes its report: no process left (ECHILD)", Who: "old keeper", role: "oldk", event: "reporting exit"},
		stepRow{Name: "the old supervisor reads the report", Who: "old supervisor", role: "old", event: "keeper reported the exit"},
		stepRow{Name: "its term loop sees the child done", Who: "old supervisor", role: "old", event: "child done"},
	)
	if deleted {
		rows = append(rows, stepRow{Name: "the term's end sent (one transaction: its record and keys)", Who: "old supervisor", role: "old", event: "ending term"})
		end := len(rows) - 1
		rows = append(rows,
			stepRow{Name: "end answered", Who: "old supervisor", role: "old", event: "term ended", From: []int{end}, OffPath: true},
			stepRow{Name: "revoke answered (sent once the old keeper is gone)", Who: "old supervisor", role: "old", event: "revoke answered", From: []int{end}, OffPath: true},
			stepRow{Name: "watch event at the next candidate (the old sentinel's delete)", Who: "next supervisor", role: "next", event: "predecessor moved; looking again", From: []int{end}, Unsplit: wakeUnsplit},
		)
	} else {
		// The graceful pass runs etcdlead's candidates through proxies too,
		// so that its requests are seen on the wire as etcdctl lock's are.
		rows = append(rows, stepRow{Name: "the term's end handed to the etcd client (one transaction: its record and keys)", Who: "old supervisor", role: "old", event: "ending term"})
		end := len(rows) - 1
		rows = append(rows, stepRow{Name: "the end on the wire", Who: "old supervisor (proxy)", Unsplit: "the client's gRPC stack",
			wire: func(r tracedRound, ts []int64) int64 {
				f, _ := firstFrame(r.old.Frames(), func(f h2frame) bool { return f.up && f.typ == h2Headers && f.t > ts[end] && ts[end] != 0 })
				return f.t
			}})
		sent := len(rows) - 1
		rows = append(rows,
			stepRow{Name: "end answered", Who: "old supervisor", role: "old", event: "term ended", From: []int{end}, OffPath: true},
			stepRow{Name: "revoke answered (sent once the old keeper is gone)", Who: "old supervisor", role: "old", event: "revoke answered", From: []int{end}, OffPath: true},
			stepRow{Name: "watch event on the wire to the next candidate (the old sentinel's delete)", Who: "next supervisor (proxy)", From: []int{sent}, Unsplit: wakeUnsplit},
			stepRow{Name: "the event reaches the campaign", Who: "next supervisor", role: "next", event: "predecessor moved; looking again", Unsplit: "the client's gRPC stack and watch dispatch"},
		)
		// The event is the last frame of etcd's to the next candidate
		// before its campaign heard of it.
		event, heard := len(rows)-2, len(rows)-1
		rows[event].wire = func(r tracedRound, ts []int64) int64 {
			var last h2frame
			for _, f := range r.next.Frames() {
				if !f.up && f.typ == h2Data && f.t > ts[sent] && f.t < ts[heard] && ts[sent] != 0 {
					last = f
				}
			}
			return last.t
		}
	}
	wake := len(rows) - 1
	from := []int{wake}
	if !deleted {
		// The request a wake-up sends, the first stream the next candidate
		// opens after it, and its answer.
		req := func(r tracedRound, ts []int64) (h2frame, bool) {
			return firstFrame(r.next.Frames(), func(f h2frame) bool { return f.up && f.typ == h2Headers && f.t > ts[wake] && ts[wake] != 0 })
		}
		rows = append(rows,
			stepRow{Name: "its start read on the wire", Who: "next supervisor (proxy)", Unsplit: "the client's gRPC stack",
				wire: func(r tracedRound, ts []int64) int64 {
					f, _ := req(r, ts)
					return f.t
				}},
			stepRow{Name: "answered on the wire", Who: "next supervisor (proxy)",
				wire: func(r tracedRound, ts []int64) int64 {
					q, ok := req(r, ts)
					if !ok {
						return 0
					}
					a, ok := answer(r.next.Frames(), q)
					if !ok {
						return 0
					}
					return a.t
				}},
		)
		from = []int{len(rows) - 1}
	}
	rows = append(rows,
		stepRow{Name: "its start read answered (one transaction)", Who: "next supervisor", role: "next", event: "start read answered", From: from},
	)
	reads := []int{len(rows) - 1}
	rows = append(rows,
		stepRow{Name: "barrier passed and confirmed: elected", Who: "next supervisor", role: "next", event: "elected", From: reads},
		stepRow{Name: "it writes the start message to its standby keeper", Who: "next supervisor", role: "next", event: "sending start to keeper"},
		stepRow{Name: "the keeper reads it", Who: "next keeper", role: "nextk", event: "start received"},
		stepRow{Name: "fork and exec of the child done", Who: "next keeper", role: "nextk", event: "child forked"},
		stepRow{Name: "the new child's first instruction", Who: "new child", Unsplit: "the child's own runtime start"},
	)
	return rows
}

func etcdctlRows(deleted bool) []stepRow {
	var rows []stepRow
	if deleted {
		rows = []stepRow{
			{Name: "the holder's key deleted (request sent)", Who: "bench"},
			{Name: "watch event reaches the next etcdctl lock", Who: "next etcdctl (proxy)", Unsplit: wakeUnsplit},
		}
	} else {
		rows = []stepRow{
			{Name: "the old child's last instruction", Who: "old child"},
			{Name: "the old etcdctl's unlock (DeleteRange) on the wire", Who: "old etcdctl (proxy)", Unsplit: notSplitExit},
			{Name: "unlock answered", Who: "old etcdctl (proxy)", From: []int{1}, OffPath: true},
			{Name: "watch event reaches the next etcdctl lock", Who: "next etcdctl (proxy)", From: []int{1}, Unsplit: wakeUnsplit},
		}
	}
	return append(rows,
		stepRow{Name: "it sends a read: any older key left? (Range)", Who: "next etcdctl (proxy)"},
		stepRow{Name: "answered", Who: "next etcdctl (proxy)"},
		stepRow{Name: "it sends a read: own key still there? (Range)", Who: "next etcdctl (proxy)"},
		stepRow{Name: "answered", Who: "next etcdctl (proxy)"},
		stepRow{Name: "the new child's first instruction", Who: "new child", Unsplit: notSplitStart},
	)
}

// fillWire sets each etcdctl lock row's time from the proxies' frames. The
// next candidate's watch is the last stream it opened before the window; the
// reads are the streams it opens after the watch event, in order.
func (s *stepTable) fillWire(rounds []tracedRound, deleted bool) {
	for _, r := range rounds {
		ts := make([]int64, len(s.rows))
		ts[0], ts[len(ts)-1] = r.start, r.end
		i := 1
		if !deleted {
			if f, ok := firstFrame(r.old.Frames(), func(f h2frame) bool { return f.up && f.typ == h2Headers && f.t > r.start }); ok {
				ts[1] = f.t
				if a, ok := answer(r.old.Frames(), f); ok {
					ts[2] = a.t
				}
			}
			i = 3
		}
		next := r.next.Frames()
		var watch h2frame
		for _, f := range next {
			if f.up && f.typ == h2Headers && f.t < r.start {
				watch = f
			}
		}
		wake, ok := firstFrame(next, func(f h2frame) bool {
			return !f.up && f.typ == h2Data && f.conn == watch.conn && f.stream == watch.stream && f.t > r.start
		})
		if ok && watch.stream != 0 {
			ts[i] = wake.t
			after := wake.t
			for j := i + 1; j+1 < len(ts)-1; j += 2 {
				req, ok := firstFrame(next, func(f h2frame) bool { return f.up && f.typ == h2Headers && f.t > after && f.t <= r.end })
				if !ok {
					break
				}
				ts[j] = req.t
				if a, ok := answer(next, req); ok {
					ts[j+1] = a.t
					after = a.t
				} else {
					break
				}
			}
		}
		s.times = append(s.times, ts)
		s.gaps = append(s.gaps, time.Duration(r.end-r.start))
	}
}

func firstFrame(fs []h2frame, ok func(h2frame) bool) (h2frame, bool) {
	for _, f := range fs {
		if ok(f) {
			return f, true
		}
	}
	return h2frame{}, false
}

// answer is etcd's first frame on a request's stream.
func answer(fs []h2frame, req h2frame) (h2frame, bool) {
	return firstFrame(fs, func(f h2frame) bool {
		return !f.up && f.conn == req.conn && f.stream == req.stream && f.t >= req.t && (f.typ == h2Headers || f.typ == h2Data)
	})
}

type stepsResult struct {
	tables map[string]*stepTable // by tool key, then tool key + " deleted"
	queue  int
	marks  bool // the etcdlead binary wrote marks
}

// steps runs the traced pass: n graceful handoffs and deletes deleted-key
// handoffs per tool.
func (b *bench) steps(ctx context.Context, n, deletes, queue int) (*stepsResult, error) {
	res := &stepsResult{tables: map[string]*stepTable{}, queue: queue}
	file := filepath.Join(b.dir, "trace.log")
	for _, t := range b.tools {
		var opts func(string) (spawnOpts, error)
		proxies := map[string]*stampProxy{}
		defer func() {
			for _, p := range proxies {
				p.Close()
			}
		}()
		proxied := func(env []string) func(string) (spawnOpts, error) {
			return func(id string) (spawnOpts, error) {
				p, err := newStampProxy(b.endpoint)
				if err != nil {
					return spawnOpts{}, err
				}
				proxies[id] = p
				o := spawnOpts{env: env, endpoint: p.Addr()}
				if env != nil { // etcdlead's, traced
					o.bin = b.bins.traced
				}
				return o, nil
			}
		}
		for _, deleted := range []bool{false, true} {
			switch {
			case t.Key != lead:
				opts = proxied(nil)
			case deleted:
				opts = func(string) (spawnOpts, error) {
					return spawnOpts{env: []string{"ETCDLEAD_TRACE=" + file}, bin: b.bins.traced}, nil
				}
			default:
				opts = proxied([]string{"ETCDLEAD_TRACE=" + file})
			}
			count, size, name := n, queue, "steps"
			if deleted {
				count, size, name = deletes, 2, "steps-deleted"
			}
			if count == 0 {
				continue
			}
			b.say("step by step: %s, %d %s handoffs, %d candidates", t.Name, count, map[bool]string{false: "graceful", true: "deleted-key"}[deleted], size)
			p, err := b.newPoolWith(ctx, t, name, 10, size, opts)
			if err != nil {
				return nil, err
			}
			var rounds []tracedRound
			for range count {
				var r tracedRound
				if deleted {
					d, err := b.deleteRound(ctx, p)
					if err != nil {
						p.close()
						return nil, err
					}
					r = d.traced
				} else {
					r, err = b.gracefulRound(ctx, p)
					if err != nil {
						p.close()
						return nil, err
					}
				}
				if t.Key == ctl || !deleted {
					r.old, r.next = proxies[r.ids[0]], proxies[r.ids[1]]
					if r.old == nil || r.next == nil {
						p.close()
						return nil, fmt.Errorf("etcdctl lock: a candidate of the traced pass has no proxy")
					}
				}
				rounds = append(rounds, r)
			}
			p.close()
			tab := &stepTable{Title: t.Name}
			if t.Key == lead {
				tab.rows = etcdleadRows(deleted)
				marks, err := readMarks(file)
				if err != nil {
					return nil, err
				}
				res.marks = res.marks || len(marks) > 0
				tab.fill(rounds, marks)
			} else {
				tab.rows = etcdctlRows(deleted)
				tab.fillWire(rounds, deleted)
			}
			key := t.Key
			if deleted {
				key += " deleted"
			}
			res.tables[key] = tab
		}
	}
	return res, nil
}

// gracefulRound hands off once: the leader's child exits on request.
func (b *bench) gracefulRound(ctx context.Context, p *pool) (tracedRound, error) {
	if err := pause(ctx, 100*time.Millisecond); err != nil {
		return tracedRound{}, err
	}
	old := p.leader
	oc := p.cands[old.ID]
	resume := hush()
	old.Exit()
	next, err := b.hub.NextStart(p.group, 30*time.Second)
	resume()
	if err != nil {
		return tracedRound{}, fmt.Errorf("%s handoff: %w", p.t.Name, err)
	}
	exitT, err := old.ExitTime(5 * time.Second)
	if err != nil {
		return tracedRound{}, err
	}
	p.leader = next
	r := b.round(p, old, next, exitT)
	if err := oc.Wait(15 * time.Second); err != nil {
		return r, err
	}
	return r, p.refill(ctx)
}

func (b *bench) round(p *pool, old, next *kid, start int64) tracedRound {
	r := tracedRound{start: start, end: next.Start, pids: map[string]int{"oldk": old.PPID, "nextk": next.PPID}, ids: [2]string{old.ID, next.ID}}
	if c := p.cands[old.ID]; c != nil {
		r.pids["old"] = c.Pid()
	}
	if c := p.cands[next.ID]; c != nil {
		r.pids["next"] = c.Pid()
	}
	return r
}

// deletedRound is one handoff after the leader's queue key was deleted.
type deletedRound struct {
	traced  tracedRound
	gap     time.Duration // delete sent → next child's first instruction
	gone    time.Duration // delete sent → old child's socket closed, if before the next started
	goneTo  time.Duration // old child's socket closed → next child's first instruction
	overlap bool          // the old child still ran when the next started
}

// deleteRound deletes the leader's queue key and waits for the next child.
// An etcdlead leader stops its child at once and revokes; etcdctl lock does
// not watch its own key, so its child runs on beside the next one until the
// bench ends it. Either old candidate is then ended, so that every round
// starts alike (an etcdlead candidate would otherwise campaign again after a
// growing backoff).
func (b *bench) deleteRound(ctx context.Context, p *pool) (deletedRound, error) {
	var d deletedRound
	if err := pause(ctx, 100*time.Millisecond); err != nil {
		return d, err
	}
	old := p.leader
	oc := p.cands[old.ID]
	key, err := b.leaderKey(ctx, p.t.Prefix(p.election))
	if err != nil {
		return d, err
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	resume := hush()
	t0 := mono()
	_, err = b.cli.Delete(dctx, key)
	cancel()
	if err != nil {
		resume()
		return d, err
	}
	next, err := b.hub.NextStart(p.group, 30*time.Second)
	resume()
	if err != nil {
		return d, fmt.Errorf("%s after a deleted key: %w", p.t.Name, err)
	}
	p.leader = next
	d.gap = time.Duration(next.Start - t0)
	d.traced = b.round(p, old, next, t0)
	if g, err := old.GoneAt(0); err == nil && g <= next.Start {
		d.gone = time.Duration(g - t0)
		d.goneTo = time.Duration(next.Start - g)
	} else {
		d.overlap = true
		old.Exit()
	}
	if _, err := old.GoneAt(10 * time.Second); err != nil {
		return d, err
	}
	oc.Signal(syscall.SIGTERM)
	if err := oc.Wait(15 * time.Second); err != nil {
		return d, err
	}
	return d, p.refill(ctx)
}

// leaderKey is the oldest key under prefix: the leader's.
func (b *bench) leaderKey(ctx context.Context, prefix string) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := b.cli.Get(rctx, prefix, append(clientv3.WithFirstCreate(), clientv3.WithPrefix(), clientv3.WithKeysOnly())...)
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", fmt.Errorf("no key under %s", prefix)
	}
	return string(resp.Kvs[0].Key), nil
}

// ---- the deleted-key gap --------------------------------------------------

type deletedResult struct {
	gap     byTool
	gone    byTool // delete → old child gone, where it went before the next started
	goneTo  byTool // old child gone → next child, likewise
	overlap map[string]int
}

// deletedKey deletes the leader's queue key n times per tool, alternating,
// with one candidate waiting, and times the next child's start from the
// delete request.
func (b *bench) deletedKey(ctx context.Context, n int) (*deletedResult, error) {
	res := &deletedResult{gap: byTool{}, gone: byTool{}, goneTo: byTool{}, overlap: map[string]int{}}
	pools := map[string]*pool{}
	defer func() {
		for _, p := range pools {
			p.close()
		}
	}()
	for _, t := range b.tools {
		p, err := b.newPool(ctx, t, "deleted", 10, 2)
		if err != nil {
			return nil, err
		}
		pools[t.Key] = p
	}
	for i := 0; i < n; i++ {
		for _, t := range b.order(i) {
			d, err := b.deleteRound(ctx, pools[t.Key])
			if err != nil {
				return nil, err
			}
			res.gap[t.Key] = append(res.gap[t.Key], d.gap)
			if d.overlap {
				res.overlap[t.Key]++
			} else {
				res.gone[t.Key] = append(res.gone[t.Key], d.gone)
				res.goneTo[t.Key] = append(res.goneTo[t.Key], d.goneTo)
			}
		}
	}
	return res, nil
}
