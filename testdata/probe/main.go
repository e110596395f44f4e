// Command probe is the child that etcdlead's tests run. It proves the
// promise without timing: at start it takes a non-blocking exclusive flock on
// a shared file and holds it until it dies (its grandchild and its escapees
// share the lock, so an orphan keeps it held too). A second copy running at
// the same time cannot get the lock and fails loudly. It reports readiness and every
// signal as lines on stdout, and keeps a journal of starts and stops.
//
// With -holders N (etcdlead run --holders N), the lock is per slot: the file
// <lock>.slot<ETCDLEAD_SLOT>, so two children in one slot fail loudly; and
// each child takes one of N count files <lock>.count<k>, so that a child
// beside N others finds none free and fails loudly too, whatever the slots
// say.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func main() {
	lock := flag.String("lock", "", "file to flock while running")
	journal := flag.String("journal", "", "file to append start/stop lines to")
	ignoreTerm := flag.Bool("ignore-term", false, "report SIGTERM and SIGINT but keep running")
	exitCode := flag.Int("exit", -1, "exit with this code once ready")
	grandchild := flag.Bool("grandchild", false, "start a grandchild that shares the lock and ignores SIGTERM")
	escapees := flag.Bool("escapees", false, "start grandchildren outside the process group that share the lock and ignore SIGTERM: "+
		"one in a new process group, one in a new session, one under timeout(1) if it is installed")
	hold := flag.Bool("hold", false, "grandchild mode: print ready and wait for SIGKILL")
	churn := flag.Int("churn", 0, "start this many descendants that share the lock, ignore SIGTERM and fork short-lived processes "+
		"without pause: a tree busier than any walk of it")
	churnEscape := flag.Bool("churn-escape", false, "with -churn, every other loop in a session of its own, out of the probe's process group")
	churnOnUSR1 := flag.Bool("churn-on-usr1", false, "with -churn, the loops start forking only once the probe gets SIGUSR1")
	holders := flag.Int("holders", 0, "lock per slot, and at most this many children at once (see the package doc)")
	flag.Parse()

	id, rev := os.Getenv("ETCDLEAD_ID"), os.Getenv("ETCDLEAD_REV")
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGQUIT, syscall.SIGWINCH)
	if *hold {
		fmt.Printf("held pid=%d\n", os.Getpid())
		for range sigs {
		}
	}
	j := openJournal(*journal)
	var lockFile *os.File
	if *holders > 0 && *lock != "" {
		lockFile = holdSlot(j, *lock, *holders, id, rev)
	} else if *lock != "" {
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
		pid := startHolder(lockFile, exec.Command(self(), "-hold"))
		fmt.Println("grandchild " + strconv.Itoa(pid))
	}
	if *escapees {
		startEscapees(lockFile)
	}
	var churnGate *os.File
	if *churn > 0 {
		churnGate = startChurn(lockFile, *churn, *churnEscape)
		if !*churnOnUSR1 {
			churnGate.Close()
			churnGate = nil
		}
	}
	fmt.Printf("ready pid=%d id=%s rev=%s slot=%s slot_rev=%s name=%s election=%s\n", os.Getpid(), id, rev,
		os.Getenv("ETCDLEAD_SLOT"), os.Getenv("ETCDLEAD_SLOT_REV"), os.Getenv("ETCDLEAD_NAME"), os.Getenv("ETCDLEAD_ELECTION"))
	if *exitCode >= 0 {
		j.line("stop id=%s exit=%d", id, *exitCode)
		os.Exit(*exitCode)
	}
	for s := range sigs {
		sig := s.(syscall.Signal)
		if sig == syscall.SIGUSR1 && churnGate != nil {
			churnGate.Close()
			churnGate = nil
		}
		fmt.Printf("signal %s\n", unix.SignalName(sig))
		if (sig == syscall.SIGTERM || sig == syscall.SIGINT) && !*ignoreTerm {
			j.line("stop id=%s signal=%s", id, unix.SignalName(sig))
			signal.Reset(sig)
			_ = syscall.Kill(os.Getpid(), sig)
		}
	}
}

// countLock is the count lock a probe of -holders holds, kept here so
// that it stays open (a file no longer referenced is closed when
// collected) and passed on to the holders it starts.
var countLock *os.File

// holdSlot takes the slot's lock and a count lock (the package doc), or
// fails loudly; it returns the slot's lock file.
func holdSlot(j journalFile, lock string, holders int, id, rev string) *os.File {
	slot := os.Getenv("ETCDLEAD_SLOT")
	if n, err := strconv.Atoi(slot); err != nil || n < 0 || n >= holders {
		fail(j, "ETCDLEAD_SLOT=%q is not a slot of %d", slot, holders)
	}
	take := func(name string) *os.File {
		f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			fail(j, "open lock: %v", err)
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close()
			return nil
		}
		return f
	}
	f := take(lock + ".slot" + slot)
	if f == nil {
		j.line("OVERLAP slot=%s id=%s rev=%s pid=%d", slot, id, rev, os.Getpid())
		fmt.Println("OVERLAP")
		os.Exit(99)
	}
	for k := range holders {
		// Kept open, and so locked, until the probe and every process
		// that inherited it are gone, like the slot's lock.
		if countLock = take(lock + ".count" + strconv.Itoa(k)); countLock != nil {
			return f
		}
	}
	j.line("OVERLAP more than %d id=%s rev=%s pid=%d", holders, id, rev, os.Getpid())
	fmt.Println("OVERLAP")
	os.Exit(99)
	return nil
}

func self() string {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(98)
	}
	return self
}

// startEscapees starts holders that leave the probe's process group, as
// timeout(1), job-control shells and daemons do; each reports its pid on
// stdout ("escapee KIND pid=N").
func startEscapees(lock *os.File) {
	pg := exec.Command(self(), "-hold")
	pg.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	fmt.Printf("escapee pgid pid=%d\n", startHolder(lock, pg))
	ss := exec.Command(self(), "-hold")
	ss.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	fmt.Printf("escapee session pid=%d\n", startHolder(lock, ss))
	if path, err := exec.LookPath("timeout"); err == nil {
		to := exec.Command(path, "60", self(), "-hold")
		holder := startHolder(lock, to)
		fmt.Printf("escapee timeout pid=%d holder=%d\n", to.Process.Pid, holder)
	}
}

// startChurn starts n shell loops that share the lock (fd 3, inherited by
// every process they fork), ignore SIGTERM, and fork and exec sleep(1)
// without pause: a build, xargs -P or a shell loop, as a tree that forks
// faster than it can be walked. With escape, every other one starts a
// session of its own, out of the probe's process group. It prints their
// pids ("churn pids=A,B,...") and returns the gate: the loops start to
// fork once it is closed.
func startChurn(lock *os.File, n int, escape bool) *os.File {
	// Each loop waits for the end of this pipe, so that all start at once
	// instead of each start competing with the loops already running.
	gate, open, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(98)
	}
	var pids []string
	for i := range n {
		sh := exec.Command("/bin/sh", "-c", `trap '' TERM; read go; while :; do /bin/sleep 0.05; done`)
		sh.Stdin, sh.Stderr = gate, os.Stderr
		if lock != nil {
			sh.ExtraFiles = []*os.File{lock}
		}
		if countLock != nil {
			sh.ExtraFiles = append(sh.ExtraFiles, countLock)
		}
		sh.SysProcAttr = &syscall.SysProcAttr{Setsid: escape && i%2 == 1}
		if err := sh.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "probe:", err)
			os.Exit(98)
		}
		pids = append(pids, strconv.Itoa(sh.Process.Pid))
	}
	gate.Close()
	fmt.Println("churn pids=" + strings.Join(pids, ","))
	return open
}

// startHolder starts cmd, a holder (probe -hold, maybe under a wrapper)
// that shares the lock, waits until it is ready, and returns its pid as it
// reports it.
func startHolder(lock *os.File, cmd *exec.Cmd) int {
	cmd.Stderr = os.Stderr
	if lock != nil {
		cmd.ExtraFiles = []*os.File{lock}
	}
	if countLock != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, countLock)
	}
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(98)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "held pid=")))
	if err != nil || perr != nil {
		fmt.Fprintf(os.Stderr, "probe: holder said %q: %v\n", line, err)
		os.Exit(98)
	}
	return pid
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
