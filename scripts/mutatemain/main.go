// Command mutatemain is scripts/mutate: it applies one-line breaks of
// safety-relevant code, one at a time, each in a scratch copy of the
// checkout, runs the tests that must catch that break, and reports any
// break that no test caught. A safety test that passes with the behaviour
// it is named for removed protects nothing; this keeps that from creeping
// back in. The breaks are listed in breaks.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

func main() {
	run := flag.String("run", "", "only the breaks whose name matches this regexp")
	list := flag.Bool("list", false, "list the breaks and exit")
	baseline := flag.Bool("baseline", true, "first run each break's tests on the unbroken code: they must pass")
	timeout := flag.Duration("timeout", 10*time.Minute, "bound on each test run")
	flag.Parse()
	if err := mutate(*run, *list, *baseline, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

func mutate(pattern string, list, baseline bool, timeout time.Duration) error {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return fmt.Errorf("-run: %w", err)
	}
	var chosen []breakage
	for _, b := range breaks {
		if re.MatchString(b.name) {
			chosen = append(chosen, b)
		}
	}
	if list {
		for _, b := range chosen {
			fmt.Printf("%-34s %s: %s\n", b.name, b.file, b.why)
		}
		return nil
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	// Every break must apply to the code as it is: a stale anchor is a
	// break that silently tests nothing.
	for _, b := range chosen {
		if _, err := b.apply(root); err != nil {
			return err
		}
	}
	// One snapshot of the checkout for the whole run, so that edits made
	// while it runs reach no break.
	snap, err := snapshot(root)
	if err != nil {
		return err
	}
	defer os.RemoveAll(snap)
	root = snap
	if baseline {
		if err := runBaseline(root, chosen, timeout); err != nil {
			return err
		}
	}
	var missed []string
	fmt.Println("| break | tests | result | took |")
	fmt.Println("|---|---|---|---|")
	for _, b := range chosen {
		caught, took, detail, err := b.check(root, timeout)
		if err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
		result := "caught: " + detail
		if !caught {
			result = "**not caught**"
			missed = append(missed, b.name)
		}
		fmt.Printf("| %s | `%s` in `%s` | %s | %s |\n", b.name, strings.ReplaceAll(b.tests, "|", `\|`), b.pkg, result, took.Round(time.Second))
	}
	if len(missed) > 0 {
		return fmt.Errorf("%d break(s) not caught by any test: %s", len(missed), strings.Join(missed, ", "))
	}
	return nil
}

// runBaseline runs each distinct test selection once on an unbroken copy:
// a test that fails anyway would make every break look caught.
func runBaseline(root string, bs []breakage, timeout time.Duration) error {
	dir, err := scratch(root)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	seen := map[string]bool{}
	for _, b := range bs {
		k := b.pkg + " " + b.tests
		if seen[k] {
			continue
		}
		seen[k] = true
		if failed, out, err := goTest(dir, b.pkg, b.tests, timeout); err != nil {
			return err
		} else if failed {
			return fmt.Errorf("unbroken code fails `go test -run '%s' %s`:\n%s", b.tests, b.pkg, tail(out, 40))
		}
	}
	return nil
}

// breakage is one deliberate break of safety-relevant code.
type breakage struct {
	name     string // short, for the table
	why      string // what the break removes
	file     string // relative to the checkout
	old, new string // old must occur exactly once in file
	pkg      string // the package whose tests must catch it
	tests    string // -run pattern of those tests
}

func (b breakage) apply(dir string) ([]byte, error) {
	path := filepath.Join(dir, b.file)
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.name, err)
	}
	if n := strings.Count(string(src), b.old); n != 1 {
		return nil, fmt.Errorf("%s: %q occurs %d times in %s, want once", b.name, b.old, n, b.file)
	}
	return []byte(strings.Replace(string(src), b.old, b.new, 1)), nil
}

// check applies the break in a scratch copy and runs its tests: caught
// means they failed (and the break still builds).
func (b breakage) check(root string, timeout time.Duration) (bool, time.Duration, string, error) {
	dir, err := scratch(root)
	if err != nil {
		return false, 0, "", err
	}
	defer os.RemoveAll(dir)
	src, err := b.apply(dir)
	if err != nil {
		return false, 0, "", err
	}
	if err := os.WriteFile(filepath.Join(dir, b.file), src, 0o644); err != nil {
		return false, 0, "", err
	}
	if out, err := goCmd(dir, timeout, "vet", b.pkg); err != nil {
		return false, 0, "", fmt.Errorf("the broken code does not build:\n%s", tail(out, 20))
	}
	start := time.Now()
	failed, out, err := goTest(dir, b.pkg, b.tests, timeout)
	return failed, time.Since(start), firstFailure(out), err
}

var failLine = regexp.MustCompile(`--- FAIL: (\S+)`)

// firstFailure names the failed tests.
func firstFailure(out string) string {
	var names []string
	for _, m := range failLine.FindAllStringSubmatch(out, -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		return "the test binary failed"
	}
	return strings.Join(names, ", ")
}

func goTest(dir, pkg, tests string, timeout time.Duration) (bool, string, error) {
	out, err := goCmd(dir, timeout, "test", "-count=1", "-run", tests, pkg)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return false, out, nil
	case errors.As(err, &ee):
		return true, out, nil
	}
	return false, out, err
}

func goCmd(dir string, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("go %s timed out after %s", strings.Join(args, " "), timeout)
	}
	return string(out), err
}

// scratch copies the snapshot into a new directory.
func scratch(snap string) (string, error) {
	dir, err := os.MkdirTemp("", "etcdlead-mutate-")
	if err != nil {
		return "", err
	}
	err = filepath.WalkDir(snap, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(snap, path)
		if err != nil {
			return err
		}
		return copyFile(path, filepath.Join(dir, rel))
	})
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// snapshot copies the checkout's files (tracked and untracked, not
// ignored) into a new directory.
func snapshot(root string) (string, error) {
	out, err := exec.Command("git", "-C", root, "ls-files", "-co", "--exclude-standard", "-z").Output()
	if err != nil {
		return "", fmt.Errorf("git ls-files: %w", err)
	}
	dir, err := os.MkdirTemp("", "etcdlead-mutate-")
	if err != nil {
		return "", err
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if err := copyFile(filepath.Join(root, f), filepath.Join(dir, f)); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // deleted in the work tree
			}
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

func copyFile(from, to string) error {
	fi, err := os.Stat(from)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, b, fi.Mode().Perm())
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
