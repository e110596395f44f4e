package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// worker is the program each candidate runs while it leads. It shows what a
// real job gets from etcdlead: who it is, and the fencing token it should
// attach to every write so that a stale leader's writes can be refused.
func worker() int {
	id, rev := os.Getenv("ETCDLEAD_ID"), os.Getenv("ETCDLEAD_REV")
	if id == "" || rev == "" {
		fmt.Fprintln(os.Stderr, "worker: ETCDLEAD_ID and ETCDLEAD_REV are unset: the worker runs under etcdlead")
		return 2
	}
	// Catching SIGTERM makes the stop visible and the exit status 0, which
	// etcdlead then exits with.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for n := 1; ; n++ {
		fmt.Printf("worker: I am %s, working with fencing token rev=%s (tick %d)\n", id, rev, n)
		select {
		case s := <-sigs:
			name := "SIGTERM"
			if s == syscall.SIGINT {
				name = "SIGINT"
			}
			fmt.Printf("worker: %s received, stopping cleanly\n", name)
			return 0
		case <-tick.C:
		}
	}
}
