// Command probe is the child that etcdlead's tests run. It proves the
// promise without timing: at start it takes a non-blocking exclusive flock on
// a shared file and holds it until it dies (its grandchild shares the lock,
// so an orphan keeps it held too). A second copy running at the same time
// cannot get the lock and fails loudly. It reports readiness and every
// signal as lines on stdout, and keeps a journal of starts and stops.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

func main() {
	lock := flag.String("lock", "", "file to flock while running")
	journal := flag.String("journal", "", "file to append start/stop lines to")
	ignoreTerm := flag.Bool("ignore-term", false, "report SIGTERM and SIGINT but keep running")
	exitCode := flag.Int("exit", -1, "exit with this code once ready")
	grandchild := flag.Bool("grandchild", false, "start a grandchild that shares the lock and ignores SIGTERM")
	hold := flag.Bool("hold", false, "grandchild mode: print ready and wait for SIGKILL")
	flag.Parse()

	id, rev := os.Getenv("ETCDLEAD_ID"), os.Getenv("ETCDLEAD_REV")
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGQUIT, syscall.SIGWINCH)
	if *hold {
		fmt.Println("held")
		for range sigs {
		}
	}
	j := openJournal(*journal)
	var lockFile *os.File
	if *lock != "" {
		f, err := os.OpenFile(*lock, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			fail(j, "open lock: %v", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			j.line("OVERLAP id=%s rev=%s pid=%d", id, rev, os.Getpid())
			fmt.Println("OVERLAP")
			os.Exit(99)
		}
		lockFile = f
	}
	j.line("start id=%s rev=%s pid=%d", id, rev, os.Getpid())
	if *grandchild {
		startGrandchild(lockFile)
	}
	fmt.Printf("ready pid=%d id=%s rev=%s name=%s election=%s\n", os.Getpid(), id, rev, os.Getenv("ETCDLEAD_NAME"), os.Getenv("ETCDLEAD_ELECTION"))
	if *exitCode >= 0 {
		j.line("stop id=%s exit=%d", id, *exitCode)
		os.Exit(*exitCode)
	}
	for s := range sigs {
		sig := s.(syscall.Signal)
		fmt.Printf("signal %s\n", unix.SignalName(sig))
		if (sig == syscall.SIGTERM || sig == syscall.SIGINT) && !*ignoreTerm {
			j.line("stop id=%s signal=%s", id, unix.SignalName(sig))
			signal.Reset(sig)
			_ = syscall.Kill(os.Getpid(), sig)
		}
	}
}

func startGrandchild(lock *os.File) {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(98)
	}
	cmd := exec.Command(self, "-hold")
	cmd.Stderr = os.Stderr
	if lock != nil {
		cmd.ExtraFiles = []*os.File{lock}
	}
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(98)
	}
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil {
		fmt.Fprintln(os.Stderr, "probe: grandchild:", err)
		os.Exit(98)
	}
	fmt.Println("grandchild " + strconv.Itoa(cmd.Process.Pid))
}

type journalFile struct{ f *os.File }

func openJournal(path string) journalFile {
	if path == "" {
		return journalFile{}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(98)
	}
	return journalFile{f}
}

// line appends one line with a single write, which O_APPEND keeps whole
// among concurrent writers.
func (j journalFile) line(format string, args ...any) {
	if j.f != nil {
		_, _ = j.f.WriteString(fmt.Sprintf(format, args...) + "\n")
	}
}

func fail(j journalFile, format string, args ...any) {
	j.line("ERROR "+format, args...)
	fmt.Fprintf(os.Stderr, "probe: "+format+"\n", args...)
	os.Exit(98)
}
