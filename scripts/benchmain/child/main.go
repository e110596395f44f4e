// Command child is the program that scripts/bench has each leader run. It is
// as small as a Go program gets, so that both tools pay the same, tiny cost
// to start it:
//
//	child SOCKET ID
//
// connects to the bench's unix socket, writes "start ID T PPID" with T read
// from CLOCK_MONOTONIC as its first act, then waits for lines. On "exit" it
// writes "exit ID T" and exits 0 at once; when the socket closes (the bench
// is gone) it exits too. Signals keep their default action, so a SIGTERM from
// a keeper ends it, which the bench sees as the socket closing.
package main

import (
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

func now() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

func main() {
	t0 := now()
	if len(os.Args) != 3 {
		os.Stderr.WriteString("usage: child SOCKET ID\n")
		os.Exit(2)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		os.Exit(3)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: os.Args[1]}); err != nil {
		os.Exit(3)
	}
	id := os.Args[2]
	write(fd, "start "+id+" "+strconv.FormatInt(t0, 10)+" "+strconv.Itoa(os.Getppid())+"\n")
	buf := make([]byte, 64)
	var line []byte
	for {
		n, err := unix.Read(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			os.Exit(0)
		}
		for _, b := range buf[:n] {
			if b != '\n' {
				line = append(line, b)
				continue
			}
			if string(line) == "exit" {
				write(fd, "exit "+id+" "+strconv.FormatInt(now(), 10)+"\n")
				os.Exit(0)
			}
			line = line[:0]
		}
	}
}

func write(fd int, s string) {
	for b := []byte(s); len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			os.Exit(3)
		}
		b = b[n:]
	}
}
