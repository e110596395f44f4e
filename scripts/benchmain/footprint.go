package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// procSample is one process's counters at one moment.
type procSample struct {
	ticks    int64 // utime+stime from /proc/PID/stat, in clock ticks
	schedNS  int64 // sum of the threads' on-CPU ns from /proc/PID/task/*/schedstat
	rssKB    int64 // VmRSS
	anonKB   int64 // RssAnon: the heap, stacks and runtime, without the binary's pages
	fileKB   int64 // RssFile: pages of the binary (shared with other processes that run it)
	ussKB    int64 // Private_Clean + Private_Dirty from smaps_rollup: what the process alone holds
	ppid     int
	threads  int
	readable bool
}

// clkTck is USER_HZ, which Linux fixes at 100 for /proc.
const clkTck = 100

func readProc(pid int) procSample {
	var s procSample
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s
	}
	// The command name is in parentheses and may hold spaces.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
	f := strings.Fields(rest)
	// rest starts at field 3 (state): ppid is field 4, utime 14, stime 15.
	if len(f) < 13 {
		return s
	}
	s.ppid, _ = strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	s.ticks = ut + st
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if !ok {
				continue
			}
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			switch k {
			case "VmRSS":
				s.rssKB = n
			case "RssAnon":
				s.anonKB = n
			case "RssFile":
				s.fileKB = n
			case "Threads":
				s.threads = int(n)
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if ok && (k == "Private_Clean" || k == "Private_Dirty") {
				n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				s.ussKB += n
			}
		}
	}
	s.schedNS = int64(threadsCPU(pid))
	s.readable = true
	return s
}

// footprintRow is one idle process over the window.
type footprintRow struct {
	Tool, Role string
	TTL        int
	RSSKB      int64
	AnonKB     int64
	FileKB     int64
	USSKB      int64
	Threads    int
	CPU        time.Duration // utime+stime over the window
	Sched      time.Duration // schedstat over the window
}

type footprintResult struct {
	window time.Duration
	rows   []footprintRow
}

// sameCadenceTTL is the TTL at which etcdctl lock renews every second
// (TTL/3), as etcdlead does at its default TTL.
const sameCadenceTTL = 3

// footprint starts, for each tool and each TTL, a leader and one follower
// (and etcdctl lock at sameCadenceTTL), lets them settle, and then watches
// them idle for window.
func (b *bench) footprint(ctx context.Context, window time.Duration, ttls []int) (*footprintResult, error) {
	type watched struct {
		row footprintRow
		pid int
		s0  procSample
	}
	var ws []*watched
	var pools []*pool
	defer func() {
		for _, p := range pools {
			p.close()
		}
	}()
	type pooled struct {
		t   *tool
		ttl int
	}
	var todo []pooled
	for _, ttl := range ttls {
		for _, t := range b.tools {
			todo = append(todo, pooled{t, ttl})
		}
	}
	// etcdctl lock at TTL 3 s renews every second, as etcdlead does at
	// the default TTL: the like-for-like cadence.
	todo = append(todo, pooled{b.tools[1], sameCadenceTTL})
	for _, pt := range todo {
		t, ttl := pt.t, pt.ttl
		p, err := b.newPool(ctx, t, fmt.Sprintf("idle%d", ttl), ttl, 2)
		if err != nil {
			return nil, err
		}
		pools = append(pools, p)
		var leader, follower *cand
		for id, c := range p.cands {
			if id == p.leader.ID {
				leader = c
			} else {
				follower = c
			}
		}
		ws = append(ws, &watched{row: footprintRow{Tool: t.Name, Role: "leader", TTL: ttl}, pid: leader.Pid()})
		if t.Key == "etcdlead" {
			keeper := p.leader.PPID
			if readProc(keeper).ppid != leader.Pid() {
				return nil, fmt.Errorf("etcdlead: the child's parent %d is not a keeper of supervisor %d", keeper, leader.Pid())
			}
			ws = append(ws, &watched{row: footprintRow{Tool: t.Name, Role: "keeper", TTL: ttl}, pid: keeper})
		}
		ws = append(ws, &watched{row: footprintRow{Tool: t.Name, Role: "follower", TTL: ttl}, pid: follower.Pid()})
		for pid := range childrenOf(map[int]bool{follower.Pid(): true}) {
			ws = append(ws, &watched{row: footprintRow{Tool: t.Name, Role: "follower's standby keeper", TTL: ttl}, pid: pid})
		}
	}
	// Start-up work (the first GC cycles, connection set-up) is not idling.
	if err := pause(ctx, 3*time.Second); err != nil {
		return nil, err
	}
	for _, w := range ws {
		w.s0 = readProc(w.pid)
	}
	t0 := time.Now()
	if err := pause(ctx, window); err != nil {
		return nil, err
	}
	res := &footprintResult{window: time.Since(t0)}
	for _, w := range ws {
		s1 := readProc(w.pid)
		if !s1.readable || !w.s0.readable {
			return nil, fmt.Errorf("%s %s (pid %d) ended during the idle window", w.row.Tool, w.row.Role, w.pid)
		}
		w.row.RSSKB, w.row.AnonKB, w.row.FileKB, w.row.USSKB, w.row.Threads = s1.rssKB, s1.anonKB, s1.fileKB, s1.ussKB, s1.threads
		w.row.CPU = time.Duration(s1.ticks-w.s0.ticks) * time.Second / clkTck
		w.row.Sched = time.Duration(s1.schedNS - w.s0.schedNS)
		res.rows = append(res.rows, w.row)
	}
	return res, nil
}

// childrenOf lists the processes whose parent is in parents, by scanning
// /proc (the kernel's per-task children files are not always built in).
func childrenOf(parents map[int]bool) map[int]int {
	out := map[int]int{} // child → parent
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil && parents[ppid] {
			out[pid] = ppid
		}
	}
	return out
}
