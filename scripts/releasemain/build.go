package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// bins are one architecture's binaries.
type bins struct {
	arch     string
	etcdlead string // looks for its keeper beside itself: for the archive
	packaged string // looks for its keeper in keeperDir: for the packages
	keeper   string
}

func (r *release) binaries(stage, arch string) (*bins, error) {
	dir := filepath.Join(stage, arch)
	b := &bins{
		arch:     arch,
		etcdlead: filepath.Join(dir, "archive", "etcdlead"),
		packaged: filepath.Join(dir, "package", "etcdlead"),
		keeper:   filepath.Join(dir, "archive", "etcdlead-keeper"),
	}
	x := []string{"-X", "github.com/etcdlead/etcdlead/internal/cli.version=" + r.version}
	if r.commit != "" {
		x = append(x, "-X", "github.com/etcdlead/etcdlead/internal/cli.commit="+r.commit)
	}
	pkgX := append(x[:len(x):len(x)], "-X", "github.com/etcdlead/etcdlead/supervisor.KeeperDir="+keeperDir)
	for _, t := range []struct {
		out, pkg string
		x        []string
	}{
		{b.etcdlead, ".", x},
		{b.packaged, ".", pkgX},
		{b.keeper, "./cmd/etcdlead-keeper", nil},
	} {
		if err := r.goBuild(arch, t.out, t.pkg, t.x); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// goBuild builds a static binary: no cgo, no paths of this machine, no
// debug tables, no documentation writers. The commit comes from the stamp
// alone (-buildvcs=false): the go command records VCS data in a clone but
// not in a git worktree, so one commit would otherwise give two different
// binaries.
func (r *release) goBuild(arch, out, pkg string, x []string) error {
	ldflags := []string{"-s", "-w", "-buildid="}
	for _, a := range x {
		if strings.Contains(a, " ") { // the go command splits -ldflags on spaces outside quotes
			a = "'" + a + "'"
		}
		ldflags = append(ldflags, a)
	}
	// The tag as in README.md, "Install".
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-tags", "urfave_cli_no_docs",
		"-ldflags", strings.Join(ldflags, " "), "-o", out, pkg)
	cmd.Dir = r.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for %s: %v", pkg, arch, err)
	}
	return nil
}

// extraFiles are what archives and packages hold beside the binaries.
type extraFiles struct {
	readme, license, man string
	docs                 []string          // docs/*.md, which README.md links to
	notices              string            // the third-party licenses and notices
	linked               []linked          // what the notices hold, for the SBOMs
	completions          map[string]string // shell → script
}

// extras asks the built etcdlead for its completion scripts, so they are
// the ones of this version. It needs a binary this machine runs: the one of
// its own architecture, built anyway, else one more.
func (r *release) extras(stage string, b *bins) (*extraFiles, error) {
	e := &extraFiles{
		readme:      filepath.Join(r.root, "README.md"),
		license:     filepath.Join(r.root, "LICENSE"),
		man:         filepath.Join(r.root, "etcdlead.1"),
		completions: map[string]string{},
	}
	docs, err := filepath.Glob(filepath.Join(r.root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		return nil, fmt.Errorf("no docs/*.md under %s (%v)", r.root, err)
	}
	e.docs = docs
	exe := b.etcdlead
	if b.arch != runtime.GOARCH {
		exe = filepath.Join(stage, "host", "etcdlead")
		if _, err := os.Stat(exe); err != nil {
			if err := r.goBuild(runtime.GOARCH, exe, ".", nil); err != nil {
				return nil, err
			}
		}
	}
	dir := filepath.Join(stage, b.arch, "completions")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	e.notices = filepath.Join(stage, b.arch, noticesName)
	if e.linked, err = r.linkedModules(b.etcdlead, b.packaged, b.keeper); err != nil {
		return nil, err
	}
	if err := writeNotices(e.notices, e.linked); err != nil {
		return nil, err
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		script, err := exec.Command(exe, "completion", shell).Output()
		if err != nil {
			// A CLI without this shell's script: ship the others.
			if shell == "fish" {
				continue
			}
			return nil, fmt.Errorf("etcdlead completion %s: %v", shell, err)
		}
		p := filepath.Join(dir, shell)
		if err := os.WriteFile(p, script, 0o644); err != nil {
			return nil, err
		}
		e.completions[shell] = p
	}
	return e, nil
}
