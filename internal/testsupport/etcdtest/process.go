package etcdtest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// process is one run of an etcd executable.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been reaped
}

func startProcess(bin string, args []string, logPath string) (*process, error) {
	// Appending keeps what earlier runs of the same member (before a
	// Restart) wrote, which is often what explains a failure.
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own copy of the descriptor

	cmd := exec.Command(bin, args...)
	cmd.Env = etcdEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group keeps a ^C meant for go test from
		// reaching etcd before the test's cleanup does; Pdeathsig makes
		// the kernel kill etcd if the test process dies without cleanup.
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status says nothing the log does not
		close(p.exited)
	}()
	return p, nil
}

// signal sends sig to this process only, by PID, and is harmless once the
// process has been reaped.
func (p *process) signal(sig os.Signal) {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

func (p *process) kill() {
	p.signal(syscall.SIGKILL)
	<-p.exited
}

func (p *process) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// etcdEnv drops ETCD_* variables, which etcd reads as flags and which would
// otherwise let the developer's shell change the clusters the tests start.
func etcdEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") {
			env = append(env, kv)
		}
	}
	return env
}

// logTail returns at most the last n bytes of the file at path.
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(-n, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	if len(b) == 0 {
		return "(log is empty)"
	}
	return string(b)
}
