package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// needTool returns the path of a program a test drives. Where it is missing
// the test skips on a developer's machine and fails under CI=true, where
// .ci/run installs it.
func needTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing (.ci/run installs it): %v", name, err)
		}
		t.Skipf("%s is missing: %v", name, err)
	}
	return path
}

// TestHelperEtcdlead is etcdlead for the shells the completion tests start:
// the test binary, run by an `etcdlead` script on their PATH.
func TestHelperEtcdlead(t *testing.T) {
	if os.Getenv("ETCDLEAD_TEST_HELPER") != "1" {
		return // not a test of its own
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(Main(append([]string{"etcdlead"}, args...)))
}

// etcdleadOnPath makes a directory with an `etcdlead` that runs
// TestHelperEtcdlead, for a shell's PATH.
func etcdleadOnPath(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\nETCDLEAD_TEST_HELPER=1 exec %q -test.run='^TestHelperEtcdlead$' -- \"$@\"\n", self)
	if err := os.WriteFile(filepath.Join(dir, "etcdlead"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A new interactive zsh, set up as a user who followed docs/operating.md
// (the script in a directory of fpath, then compinit) or as one who
// sources it after compinit: the first TAB after `etcdlead stat`
// completes `status`, and the shell does not beep. A script whose first
// call only defines the completer leaves the first TAB of every shell
// without a match.
func TestZshCompletesOnFirstTab(t *testing.T) {
	zsh := needTool(t, "zsh")
	for _, setup := range []string{"fpath", "source"} {
		t.Run(setup, func(t *testing.T) {
			bin := etcdleadOnPath(t)
			home := t.TempDir()
			fdir := filepath.Join(home, "completions")
			if err := os.Mkdir(fdir, 0o755); err != nil {
				t.Fatal(err)
			}
			var rc string
			switch setup {
			case "fpath":
				if err := os.WriteFile(filepath.Join(fdir, "_etcdlead"), []byte(zshCompletion), 0o644); err != nil {
					t.Fatal(err)
				}
				rc = "fpath=(" + fdir + " $fpath)\nautoload -Uz compinit && compinit -D\n"
			case "source":
				rc = "autoload -Uz compinit && compinit -D\nsource <(etcdlead completion zsh)\n"
			}
			// The widget on ^X shows the line as the shell holds it, between
			// markers no completion prints.
			rc += `PS1='READY> '
show-buffer() { print -rn -- $'\n'"<<$BUFFER>>"$'\n' }
zle -N show-buffer
bindkey '^X' show-buffer
`
			if err := os.WriteFile(filepath.Join(home, ".zshrc"), []byte(rc), 0o644); err != nil {
				t.Fatal(err)
			}
			sh := startInTerminal(t, zsh, []string{"-d", "-i"}, []string{
				"HOME=" + home, "ZDOTDIR=" + home, "TERM=dumb",
				"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
			})
			sh.waitFor(t, "READY> ")
			sh.mark()
			sh.write(t, "etcdlead stat\t\x18")
			line := sh.waitFor(t, "<<", ">>")
			if line != "etcdlead status " {
				t.Errorf("the first TAB turned `etcdlead stat` into %q, want %q", line, "etcdlead status ")
			}
			if bytes.Contains(sh.since(), []byte("\a")) {
				t.Errorf("the shell beeped on the first TAB; it wrote %q", sh.since())
			}
		})
	}
}

// terminal is a process on a pseudo-terminal, and all it wrote there.
type terminal struct {
	master *os.File
	mu     sync.Mutex
	out    []byte
	from   int // where mark was set
	grew   chan struct{}
}

func startInTerminal(t *testing.T, path string, args, env []string) *terminal {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	term := &terminal{master: master, grew: make(chan struct{}, 1)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("the terminal showed:\n%q", term.all())
		}
	})
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			term.mu.Lock()
			term.out = append(term.out, buf[:n]...)
			term.mu.Unlock()
			select {
			case term.grew <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	return term
}

func (term *terminal) write(t *testing.T, s string) {
	t.Helper()
	if _, err := term.master.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func (term *terminal) all() []byte {
	term.mu.Lock()
	defer term.mu.Unlock()
	return bytes.Clone(term.out)
}

// mark starts what since returns and waitFor looks in.
func (term *terminal) mark() {
	term.mu.Lock()
	defer term.mu.Unlock()
	term.from = len(term.out)
}

func (term *terminal) since() []byte {
	term.mu.Lock()
	defer term.mu.Unlock()
	return bytes.Clone(term.out[term.from:])
}

// waitFor waits until the terminal shows start, and end after it, since the
// mark, and returns what is between them.
func (term *terminal) waitFor(t *testing.T, start string, end ...string) string {
	t.Helper()
	timeout := time.After(30 * time.Second) // a guard: a loaded machine starts shells slowly
	for {
		s := string(term.since())
		if _, after, ok := strings.Cut(s, start); ok {
			if len(end) == 0 {
				return ""
			}
			if between, _, ok := strings.Cut(after, end[0]); ok {
				return between
			}
		}
		select {
		case <-term.grew:
		case <-timeout:
			t.Fatalf("the terminal did not show %q within 30s", start)
		}
	}
}
