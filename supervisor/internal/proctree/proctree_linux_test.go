package proctree

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/bootclock"
)

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		line string
		want Stat
	}{
		{"42 (sleep) S 7 42 7 0 -1 4194560", Stat{PPid: 7, Pgrp: 42}},
		// A command name may hold spaces and parentheses.
		{"42 (a) b) (c d) R 9 3 3 0", Stat{PPid: 9, Pgrp: 3}},
	} {
		got, err := parseStat([]byte(c.line))
		if err != nil || got != c.want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v", c.line, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "42 sleep S 7 42", "42 (x) S", "42 (x) S y 1"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

// Where the kernel has the children files, the parent-pid scan that stands
// in for them elsewhere sees the same children.
func TestStatScanSeesWhatChildrenFilesSee(t *testing.T) {
	host := hostProcfs()
	if host.scan {
		t.Skip("no /proc/PID/task/TID/children on this kernel: the scan is the only walk")
	}
	// The shell prints once it has forked the three.
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & sleep 60 & sleep 60 & echo forked; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sh := cmd.Process.Pid
	t.Cleanup(func() {
		// SIGKILL to the sleeps lets the shell's wait return.
		s := &Sweep{fs: procfs{root: "/proc", scan: true}, root: sh, Sig: syscall.SIGKILL, seen: map[int]int{}}
		_, _ = s.Run(bootclock.Now() + time.Second)
		s.Close()
		_ = cmd.Wait()
	})
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "forked\n" {
		t.Fatalf("shell said %q, %v", line, err)
	}
	files := host.childrenFiles(sh)
	if len(files) != 3 {
		t.Fatalf("children files list %v, want the three sleeps", files)
	}
	scan := procfs{root: "/proc", scan: true}.lister()(sh)
	slices.Sort(files)
	slices.Sort(scan)
	if !slices.Equal(files, scan) {
		t.Fatalf("children files say %v, the stat scan %v", files, scan)
	}
	// Both walks find them below this process.
	for _, s := range []*Sweep{{fs: host, root: os.Getpid(), Sig: 0, seen: map[int]int{}},
		{fs: procfs{root: "/proc", scan: true}, root: os.Getpid(), Sig: 0, seen: map[int]int{}}} {
		if done, err := s.Run(bootclock.Now() + 20*time.Second); !done || err != nil {
			t.Fatalf("walk: done %v, %v", done, err)
		}
		for _, pid := range append(files, sh) {
			if _, ok := s.seen[pid]; !ok {
				t.Errorf("walk (scan=%v) missed %s", s.fs.scan, strconv.Itoa(pid))
			}
		}
		s.Close()
	}
}
