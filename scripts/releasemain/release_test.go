package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
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
			"dpkg-deb": "dpkg", "rpm": "rpm", "systemd-analyze": "systemd", "lintian": "lintian"}[tool])
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

// docs are the documents README.md links to, docs/*.md, as paths beside
// it.
func docs(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no ../../docs/*.md (%v)", err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, "docs/"+filepath.Base(p))
	}
	return names
}

// releases are two runs of the release, as scripts/release makes it, for
// both architectures, each into a directory of its own: what TestRelease,
// TestImage and TestSBOM check, built once for all of them. The second
// run is there to be compared with the first.
var releases = struct {
	once        sync.Once
	first, next string
	err         error
}{}

func releaseTwice(t *testing.T) (first, next string) {
	t.Helper()
	releases.once.Do(func() {
		releases.first = filepath.Join(releaseDir, "first")
		releases.next = filepath.Join(releaseDir, "next")
		for _, out := range []string{releases.first, releases.next} {
			if releases.err = run([]string{"-root", "../..", "-out", out, testVersion}); releases.err != nil {
				return
			}
		}
	})
	if releases.err != nil {
		t.Fatalf("release: %v", releases.err)
	}
	return releases.first, releases.next
}

// releaseDir holds the releases; TestMain removes it.
var releaseDir string

func TestMain(m *testing.M) {
	var err error
	if releaseDir, err = os.MkdirTemp("", "etcdlead-release-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(releaseDir)
	os.Exit(code)
}

// TestRelease checks what an operator installs: the .deb's files and
// modes, its etcdlead as extracted, the .rpm's files, the archive's
// entries, the template unit against systemd, and that a second run on the
// same commit writes the same SHA256SUMS.
func TestRelease(t *testing.T) {
	need(t, "dpkg-deb")
	dist, again := releaseTwice(t)
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
	want := map[string]string{
		"/usr/bin/etcdlead":                               "-rwxr-xr-x",
		"/usr/libexec/etcdlead/etcdlead-keeper":           "-rwxr-xr-x",
		"/usr/lib/systemd/system/etcdlead@.service":       "-rw-r--r--",
		"/etc/etcdlead/example.env":                       "-rw-r--r--",
		"/usr/share/man/man1/etcdlead.1.gz":               "-rw-r--r--",
		"/usr/share/bash-completion/completions/etcdlead": "-rw-r--r--",
		"/usr/share/zsh/vendor-completions/_etcdlead":     "-rw-r--r--",
		"/usr/share/doc/etcdlead/copyright":               "-rw-r--r--",
		"/usr/share/doc/etcdlead/changelog.Debian.gz":     "-rw-r--r--",
		"/usr/share/doc/etcdlead/README.md":               "-rw-r--r--",
		"/usr/share/doc/etcdlead/hardening.conf":          "-rw-r--r--",
		"/usr/share/lintian/overrides/etcdlead":           "-rw-r--r--",
		"/usr/share/doc/etcdlead/THIRD-PARTY-NOTICES":     "-rw-r--r--",
	}
	for _, d := range docs(t) {
		want["/usr/share/doc/etcdlead/"+d] = "-rw-r--r--"
	}
	for path, mode := range want {
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
	checkNotices(t, filepath.Join(root, "usr/share/doc/etcdlead/THIRD-PARTY-NOTICES"),
		etcdlead, filepath.Join(root, "usr/libexec/etcdlead/etcdlead-keeper"))
	if b, err := os.ReadFile(etcdlead); err != nil || !bytes.Contains(b, []byte("/usr/libexec/etcdlead")) {
		t.Errorf("the packaged etcdlead has no keeper directory stamped in (%v)", err)
	}

	checkArchive(t, filepath.Join(dist, "etcdlead_0.0.0-test_linux_amd64.tar.gz"))
	t.Run("lintian", func(t *testing.T) { checkLintian(t, deb) })
	t.Run("rpm", func(t *testing.T) { checkRPM(t, filepath.Join(dist, "etcdlead-0.0.0~test-1.x86_64.rpm")) })
	t.Run("unit", func(t *testing.T) { checkUnit(t, root, etcdlead) })
	t.Run("hardening", func(t *testing.T) { checkHardening(t, root, etcdlead) })
	t.Run("example.env", func(t *testing.T) { checkExampleEnv(t, root) })

	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	sums2, err := os.ReadFile(filepath.Join(again, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SHA256SUMS:\n%s", sums)
	if !bytes.Equal(sums, sums2) {
		t.Errorf("two runs on one commit differ:\n%s\n%s", sums, sums2)
	}
	checkSums(t, dist, string(sums))
}

// checkSums checks that SHA256SUMS lists every file of dist/ but itself,
// the image layout's included, and that sha256sum checks them all, as
// README.md's "Install" has a user do.
func checkSums(t *testing.T, dist, sums string) {
	t.Helper()
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(sums), "\n") {
		_, name, _ := strings.Cut(line, "  ")
		listed[name] = true
	}
	err := filepath.WalkDir(dist, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dist, path)
		if rel != "SHA256SUMS" && !listed[rel] {
			t.Errorf("SHA256SUMS does not list %s", rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sha256sum", "-c", "--strict", "--quiet", "SHA256SUMS")
	cmd.Dir = dist
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
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

// checkNotices checks that the notices name the Go distribution and every
// module the binaries hold, as their build information lists them, each
// followed by its license or copyright text.
func checkNotices(t *testing.T, notices string, binaries ...string) {
	t.Helper()
	b, err := os.ReadFile(notices)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, p := range binaries {
		info, err := buildinfo.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		heads := []string{"Go " + info.GoVersion}
		for _, d := range info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			heads = append(heads, d.Path+" "+d.Version)
		}
		for _, h := range heads {
			_, after, ok := strings.Cut(text, "\n================ "+h+" ================\n")
			section, _, _ := strings.Cut(after, "\n================ ")
			lower := strings.ToLower(section)
			if !ok || !strings.Contains(lower, "license") && !strings.Contains(lower, "copyright") {
				t.Errorf("%s: no license of %s (linked into %s)", filepath.Base(notices), h, filepath.Base(p))
			}
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
	want := append([]string{"etcdlead", "etcdlead-keeper", "README.md", "LICENSE", "etcdlead.1",
		"THIRD-PARTY-NOTICES", "completions/etcdlead.bash", "completions/_etcdlead"}, docs(t)...)
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
		"-rw-r--r-- root/root /usr/share/licenses/etcdlead/THIRD-PARTY-NOTICES\n",
		"-rw-r--r-- root/root /usr/share/zsh/site-functions/_etcdlead\n",
	} {
		if !strings.Contains(list, want) {
			t.Errorf("the rpm has no %q", strings.TrimSpace(want))
		}
	}
	if conf := output(t, "rpm", "-qcp", path); strings.TrimSpace(conf) != "/etc/etcdlead/example.env" {
		t.Errorf("rpm config files: %q", conf)
	}
	// rpm removes on erase only the directories a package owns, and
	// `rpm -qf` names no package for the others: every directory of
	// etcdlead's own must be in the package, owned by root.
	owned := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "drwxr-xr-x" && f[1] == "root/root" {
			owned[f[2]] = true
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		f := strings.Fields(line)
		for d := filepath.Dir(f[len(f)-1]); d != "/"; d = filepath.Dir(d) {
			if strings.Contains(filepath.Base(d), "etcdlead") && !owned[d] {
				t.Errorf("the rpm does not own %s (holding %s)", d, f[len(f)-1])
				owned[d] = true // once
			}
		}
	}
}

// lintianExplained are the tags lintian may still report on the .deb,
// each for a reason; every other tag, at every level, fails the test.
var lintianExplained = map[string]string{}

// checkLintian runs lintian on the .deb at every level, experimental and
// pedantic tags included, as Debian's archive would before accepting it.
// What lintian reports about the man page comes from etcdlead.1, which
// internal/cli generates: named apart so that its cause is plain.
func checkLintian(t *testing.T, deb string) {
	need(t, "lintian")
	cmd := exec.Command("lintian", "--pedantic", "--display-info", "--display-experimental",
		"--tag-display-limit", "0", "--fail-on", "none", "--color", "never", deb)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("lintian: %v\n%s%s", err, stdout.Bytes(), stderr.Bytes())
	}
	t.Logf("lintian %s:\n%s", filepath.Base(deb), stdout.Bytes())
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		// "E: etcdlead: tag [context]", or a line of lintian's own.
		level, rest, ok := strings.Cut(line, ": etcdlead")
		if !ok || len(level) != 1 {
			continue
		}
		_, rest, _ = strings.Cut(rest, ": ")
		tag, _, _ := strings.Cut(rest, " ")
		switch {
		case lintianExplained[tag] != "":
			t.Logf("%s (%s)", line, lintianExplained[tag])
		case tag == "spelling-error-in-binary" && !inSources(t, strings.Fields(rest)[1]):
			// lintian reads every run of printable bytes as text: four
			// bytes of a hash or of compressed data may spell a word.
			t.Logf("%s (not in etcdlead's sources: bytes of the binary that happen to read as a word)", line)
		case strings.Contains(line, "usr/share/man/"):
			t.Errorf("%s\n\tfrom the man page, etcdlead.1 (generated by internal/cli)", line)
		default:
			t.Errorf("%s", line)
		}
	}
}

// inSources reports whether word occurs as a word, in any case, in the
// module's Go sources: a misspelling there is etcdlead's own.
func inSources(t *testing.T, word string) bool {
	t.Helper()
	re := regexp.MustCompile(`(?i)\b` + regexp.QuoteMeta(word) + `\b`)
	found := false
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || found {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			found = re.Match(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
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

// containmentUndoers are settings a hardening drop-in must leave off
// (hardening.conf says why): each makes etcdlead fall back from the
// cgroup, or hides descendants from the keeper's walk, or slows the
// fence's kill thread.
var containmentUndoers = []string{"ProtectControlGroups", "RestrictNamespaces", "ProtectProc",
	"RestrictRealtime", "PrivateUsers"}

// checkHardening checks the hardening drop-in the packages ship as
// documentation: it sets none of containmentUndoers, its system call
// filter lets etcdlead's calls through, systemd takes it with the unit,
// and systemd-analyze rates the hardened unit no worse than OK.
func checkHardening(t *testing.T, root, etcdlead string) {
	need(t, "systemd-analyze")
	conf, err := os.ReadFile(filepath.Join(root, "usr/share/doc/etcdlead/hardening.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(conf), "\n") {
		key, value, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.HasPrefix(key, "#") {
			continue
		}
		if slices.Contains(containmentUndoers, key) {
			t.Errorf("the drop-in sets %s=%s, which undoes the containment", key, value)
		}
	}

	checkSyscallFilter(t, string(conf))

	unit, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system/etcdlead@.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit = bytes.ReplaceAll(unit, []byte("ExecStart=/usr/bin/etcdlead "), []byte("ExecStart="+etcdlead+" "))
	// As an operator installs it: the unit, and the drop-in beside it.
	top := t.TempDir()
	sys := filepath.Join(top, "etc/systemd/system")
	dropIn := filepath.Join(sys, "etcdlead@.service.d")
	if err := os.MkdirAll(dropIn, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sys, "etcdlead@.service"), unit, 0o644); err != nil {
		t.Fatal(err)
	}
	exposure := func() string {
		out := output(t, "systemd-analyze", "security", "--offline=yes", "--root="+top, "etcdlead@test.service")
		_, verdict, ok := strings.Cut(out, "Overall exposure level for etcdlead@test.service: ")
		if !ok {
			t.Fatalf("systemd-analyze security gave no overall exposure:\n%s", out)
		}
		return strings.TrimSpace(verdict)
	}
	plain := exposure()
	if err := os.WriteFile(filepath.Join(dropIn, "hardening.conf"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	hardened := exposure()
	t.Logf("systemd-analyze security etcdlead@test.service: %s; with hardening.conf: %s", plain, hardened)
	// systemd's own words for its bands: OK, MEDIUM, EXPOSED, UNSAFE.
	if !strings.Contains(hardened, " OK") && !strings.Contains(hardened, " SAFE") {
		t.Errorf("the unit with hardening.conf is rated %q, not OK", hardened)
	}
	out, err := exec.Command("systemd-analyze", "verify", "--man=no", filepath.Join(sys, "etcdlead@test.service")).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify etcdlead@test.service with hardening.conf: %v\n%s", err, out)
	}
}

// checkExampleEnv checks that example.env, where an operator raises the
// kill timeout, says that the unit's stop timeout must stay longer, and
// that the two as shipped agree.
func checkExampleEnv(t *testing.T, root string) {
	env, err := os.ReadFile(filepath.Join(root, "etc/etcdlead/example.env"))
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system/etcdlead@.service"))
	if err != nil {
		t.Fatal(err)
	}
	before, after, ok := strings.Cut(string(env), "\n#ETCDLEAD_KILL_TIMEOUT=")
	if !ok {
		t.Fatalf("example.env offers no ETCDLEAD_KILL_TIMEOUT:\n%s", env)
	}
	paragraph := before[strings.LastIndex(before, "\n\n")+1:]
	if !strings.Contains(paragraph, "TimeoutStopSec") {
		t.Errorf("example.env offers ETCDLEAD_KILL_TIMEOUT without naming TimeoutStopSec:\n%s", paragraph)
	}
	value, _, _ := strings.Cut(after, "\n")
	kill, err := time.ParseDuration(value)
	if err != nil {
		t.Fatal(err)
	}
	_, stop, ok := strings.Cut(string(unit), "\nTimeoutStopSec=")
	stop, _, _ = strings.Cut(stop, "\n")
	stopD, err := time.ParseDuration(stop)
	if !ok || err != nil {
		t.Fatalf("the unit's TimeoutStopSec %q: %v", stop, err)
	}
	if stopD <= kill {
		t.Errorf("TimeoutStopSec=%s is not longer than example.env's kill timeout %s", stopD, kill)
	}
}

// etcdleadSyscalls are the system calls etcdlead and its keeper make to
// contain, signal and reap a command's tree and to fence it (supervisor/,
// internal/bootclock/): a filter that refuses one of them makes etcdlead
// fall back or fail.
var etcdleadSyscalls = []string{"clone3", "pidfd_open", "pidfd_send_signal", "kill", "prctl",
	"waitid", "wait4", "setsid", "setpgid", "sched_setattr", "timerfd_create", "timerfd_settime",
	"inotify_init1", "inotify_add_watch", "getxattr", "unlinkat", "mkdirat", "uname", "poll"}

// checkSyscallFilter checks that the drop-in's SystemCallFilter= lets
// etcdlead's system calls through: its allow lists less its deny lists,
// each group expanded as systemd-analyze expands it.
func checkSyscallFilter(t *testing.T, conf string) {
	allow, deny := map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(conf, "\n") {
		value, ok := strings.CutPrefix(strings.TrimSpace(line), "SystemCallFilter=")
		if !ok {
			continue
		}
		set := allow
		if v, ok := strings.CutPrefix(value, "~"); ok {
			set, value = deny, v
		}
		for _, name := range strings.Fields(value) {
			for _, call := range expandSyscalls(t, name) {
				set[call] = true
			}
		}
	}
	if len(allow) == 0 {
		t.Fatalf("the drop-in has no SystemCallFilter= allow list")
	}
	for _, call := range etcdleadSyscalls {
		if !allow[call] || deny[call] {
			t.Errorf("the drop-in's SystemCallFilter= refuses %s, which etcdlead needs", call)
		}
	}
}

// expandSyscalls is a system call, or the calls of a group and of the
// groups it holds.
func expandSyscalls(t *testing.T, name string) []string {
	if !strings.HasPrefix(name, "@") {
		return []string{name}
	}
	var calls []string
	for _, line := range strings.Split(output(t, "systemd-analyze", "syscall-filter", name), "\n") {
		f := strings.TrimSpace(line)
		if f == "" || f == name || strings.HasPrefix(f, "#") {
			continue
		}
		calls = append(calls, expandSyscalls(t, f)...)
	}
	return calls
}
