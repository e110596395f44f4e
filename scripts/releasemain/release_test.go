package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const testVersion = "v0.0.0-test"

// need skips when tool is missing, except under CI, whose .ci/run installs
// it: there a missing tool fails the test rather than hide it.
func need(t *testing.T, tool string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing; .ci/run installs it", tool)
		}
		t.Skipf("%s is missing (apt-get install %s): skipping what needs it", tool, map[string]string{
			"dpkg-deb": "dpkg", "rpm": "rpm", "systemd-analyze": "systemd"}[tool])
	}
}

func output(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// releaseInto runs the release for amd64 alone, as scripts/release would, into
// a directory of its own.
func releaseInto(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "dist")
	if err := run([]string{"-root", "../..", "-arch", "amd64", "-out", out, testVersion}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRelease checks what an operator installs: the .deb's files and
// modes, its etcdlead as extracted, the .rpm's files, the archive's
// entries, the template unit against systemd, and that a second run on the
// same commit writes the same SHA256SUMS.
func TestRelease(t *testing.T) {
	need(t, "dpkg-deb")
	dist := releaseInto(t)
	deb := filepath.Join(dist, "etcdlead_0.0.0~test-1_amd64.deb")

	listing := output(t, "dpkg-deb", "-c", deb)
	t.Logf("dpkg-deb -c %s:\n%s", filepath.Base(deb), listing)
	modes := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(listing), "\n") {
		f := strings.Fields(line)
		if f[1] != "root/root" {
			t.Errorf("%s is owned by %s, want root/root", f[5], f[1])
		}
		modes[strings.TrimPrefix(f[5], ".")] = f[0]
	}
	for path, mode := range map[string]string{
		"/usr/bin/etcdlead":                               "-rwxr-xr-x",
		"/usr/libexec/etcdlead/etcdlead-keeper":           "-rwxr-xr-x",
		"/usr/lib/systemd/system/etcdlead@.service":       "-rw-r--r--",
		"/etc/etcdlead/example.env":                       "-rw-r--r--",
		"/usr/share/man/man1/etcdlead.1.gz":               "-rw-r--r--",
		"/usr/share/bash-completion/completions/etcdlead": "-rw-r--r--",
		"/usr/share/zsh/vendor-completions/_etcdlead":     "-rw-r--r--",
		"/usr/share/doc/etcdlead/copyright":               "-rw-r--r--",
		"/usr/share/doc/etcdlead/README.md":               "-rw-r--r--",
	} {
		if modes[path] != mode {
			t.Errorf("%s: mode %q, want %q", path, modes[path], mode)
		}
	}
	if conf := output(t, "dpkg-deb", "-I", deb, "conffiles"); !strings.Contains(conf, "/etc/etcdlead/example.env") {
		t.Errorf("example.env is not a conffile: %q", conf)
	}

	root := t.TempDir()
	output(t, "dpkg-deb", "-x", deb, root)
	etcdlead := filepath.Join(root, "usr/bin/etcdlead")
	version := output(t, etcdlead, "--version")
	t.Logf("etcdlead --version:\n%s", version)
	if !strings.HasPrefix(version, "etcdlead version "+testVersion+"\ncommit ") || !strings.Contains(version, "\ngo1.") {
		t.Errorf("--version of the packaged etcdlead:\n%s", version)
	}
	if fish, err := exec.Command(etcdlead, "completion", "fish").Output(); err == nil && len(fish) > 0 {
		if modes["/usr/share/fish/vendor_completions.d/etcdlead.fish"] != "-rw-r--r--" {
			t.Errorf("etcdlead makes a fish completion, but the package does not install it")
		}
	} else {
		t.Logf("etcdlead completion fish: %v: the package has bash and zsh completions only", err)
	}
	if head := strings.TrimSpace(output(t, "git", "-C", "../..", "rev-parse", "HEAD")); !strings.Contains(version, "\ncommit "+head) {
		t.Errorf("--version names no commit %s", head)
	}
	checkStatic(t, etcdlead)
	checkStatic(t, filepath.Join(root, "usr/libexec/etcdlead/etcdlead-keeper"))
	if b, err := os.ReadFile(etcdlead); err != nil || !bytes.Contains(b, []byte("/usr/libexec/etcdlead")) {
		t.Errorf("the packaged etcdlead has no keeper directory stamped in (%v)", err)
	}

	checkArchive(t, filepath.Join(dist, "etcdlead_0.0.0-test_linux_amd64.tar.gz"))
	t.Run("rpm", func(t *testing.T) { checkRPM(t, filepath.Join(dist, "etcdlead-0.0.0~test-1.x86_64.rpm")) })
	t.Run("unit", func(t *testing.T) { checkUnit(t, root, etcdlead) })

	again := releaseInto(t)
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	sums2, err := os.ReadFile(filepath.Join(again, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SHA256SUMS:\n%s", sums)
	if !bytes.Equal(sums, sums2) || len(bytes.Split(bytes.TrimSpace(sums), []byte("\n"))) != 3 {
		t.Errorf("two runs on one commit differ:\n%s\n%s", sums, sums2)
	}
}

// checkStatic fails for a dynamically linked binary: one with an
// interpreter (ld.so) needs the C library of the machine it runs on.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", path)
		}
	}
}

func checkArchive(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: uid/gid %d/%d", h.Name, h.Uid, h.Gid)
		}
		names = append(names, h.Name)
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("archive entries are not sorted: %q", names)
	}
	want := []string{"etcdlead", "etcdlead-keeper", "README.md", "LICENSE", "etcdlead.1",
		"completions/etcdlead.bash", "completions/_etcdlead"}
	have := strings.Join(names, "\n") + "\n"
	for _, w := range want {
		if !strings.Contains(have, "/"+w+"\n") {
			t.Errorf("archive has no %s: %q", w, names)
		}
	}
}

func checkRPM(t *testing.T, path string) {
	need(t, "rpm")
	list := output(t, "rpm", "-qp", "--qf", "[%{FILEMODES:perms} %{FILEUSERNAME}/%{FILEGROUPNAME} %{FILENAMES}\n]", path)
	t.Logf("rpm file list:\n%s", list)
	for _, want := range []string{
		"-rwxr-xr-x root/root /usr/bin/etcdlead\n",
		"-rwxr-xr-x root/root /usr/libexec/etcdlead/etcdlead-keeper\n",
		"-rw-r--r-- root/root /usr/lib/systemd/system/etcdlead@.service\n",
		"-rw-r--r-- root/root /etc/etcdlead/example.env\n",
		"-rw-r--r-- root/root /usr/share/man/man1/etcdlead.1.gz\n",
		"-rw-r--r-- root/root /usr/share/licenses/etcdlead/LICENSE\n",
		"-rw-r--r-- root/root /usr/share/zsh/site-functions/_etcdlead\n",
	} {
		if !strings.Contains(list, want) {
			t.Errorf("the rpm has no %q", strings.TrimSpace(want))
		}
	}
	if conf := output(t, "rpm", "-qcp", path); strings.TrimSpace(conf) != "/etc/etcdlead/example.env" {
		t.Errorf("rpm config files: %q", conf)
	}
}

// checkUnit verifies the packaged template unit on an instance name, with
// ExecStart pointed at the extracted etcdlead (systemd-analyze checks that
// the executable exists).
func checkUnit(t *testing.T, root, etcdlead string) {
	need(t, "systemd-analyze")
	unit, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system/etcdlead@.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ExecStart=/usr/bin/etcdlead run -- $ETCDLEAD_COMMAND\n",
		"EnvironmentFile=/etc/etcdlead/%i.env\n",
		"Environment=ETCDLEAD_ELECTION=%i\n",
		"Type=notify\n", "KillMode=mixed\n", "Delegate=yes\n", "SuccessExitStatus=143\n",
	} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("the unit has no %q", strings.TrimSpace(want))
		}
	}
	dir := t.TempDir()
	unit = bytes.ReplaceAll(unit, []byte("ExecStart=/usr/bin/etcdlead "), []byte("ExecStart="+etcdlead+" "))
	if err := os.WriteFile(filepath.Join(dir, "etcdlead@.service"), unit, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", "--man=no", filepath.Join(dir, "etcdlead@test.service")).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify etcdlead@test.service: %v\n%s", err, out)
	}
}
