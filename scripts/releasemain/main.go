// Command releasemain builds a release of etcdlead into dist/: static
// binaries for linux/amd64 and linux/arm64, a .tar.gz archive, a .deb and an
// .rpm per architecture, an OCI image layout of both (image.go), a
// CycloneDX SBOM of each binary and of the image (sbom.go), and
// SHA256SUMS. Run it as scripts/release VERSION.
//
// It is a module of its own so that nfpm, which builds the packages,
// go-containerregistry and cyclonedx-go, and everything they need, stay out
// of etcdlead's go.mod and out of every `go install` of etcdlead.
//
// Reproducible: every mtime is the commit's time (or SOURCE_DATE_EPOCH),
// archive and image layer entries are sorted and owned by uid/gid 0, gzip
// headers carry no name or time, the SBOMs' serial numbers come from what
// they describe, and the binaries are built with -trimpath; two runs on one
// commit write the same SHA256SUMS and the same image digest.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// keeperDir is where the packages install the keeper; their etcdlead is
// built to look there (supervisor.KeeperDir), the archives' one beside
// itself.
const keeperDir = "/usr/libexec/etcdlead"

var versionRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

type release struct {
	root    string    // the etcdlead checkout
	out     string    // dist/
	version string    // v1.2.3, as stamped into the binaries
	commit  string    // HEAD, marked when the tree has changes; "" outside git
	mtime   time.Time // every file's time
	arches  []string
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release: "+err.Error())
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	root := fs.String("root", "", "the etcdlead checkout (default: two directories up)")
	out := fs.String("out", "", "output directory, cleared first (default: ROOT/dist)")
	arch := fs.String("arch", "amd64,arm64", "comma-separated GOARCH values to build for")
	usage := func(w io.Writer) {
		fs.SetOutput(w)
		fmt.Fprintln(w, "usage: scripts/release [-arch amd64,arm64] [-out DIR] VERSION   (VERSION like v1.2.3)")
		fs.PrintDefaults()
	}
	// The flag package would print the usage to one writer for both -h and
	// a mistake; -h is a question, answered on stdout with success.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		usage(os.Stdout)
		return nil
	} else if err != nil {
		usage(os.Stderr)
		return err
	}
	if fs.NArg() != 1 || !versionRE.MatchString(fs.Arg(0)) {
		usage(os.Stderr)
		return errors.New("one VERSION like v1.2.3 is needed")
	}
	r := &release{version: fs.Arg(0), arches: strings.Split(*arch, ",")}
	var err error
	if r.root, err = filepath.Abs(cmpOr(*root, "../..")); err != nil {
		return err
	}
	if r.out, err = filepath.Abs(cmpOr(*out, filepath.Join(r.root, "dist"))); err != nil {
		return err
	}
	if err := r.source(); err != nil {
		return err
	}
	if err := os.RemoveAll(r.out); err != nil {
		return err
	}
	if err := os.MkdirAll(r.out, 0o755); err != nil {
		return err
	}
	return r.build()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// source finds the commit and the time every file gets: SOURCE_DATE_EPOCH
// when set (the reproducible-builds convention), else the commit's time.
func (r *release) source() error {
	if _, err := os.Stat(filepath.Join(r.root, "go.mod")); err != nil {
		return fmt.Errorf("%s is not the etcdlead checkout: %v", r.root, err)
	}
	if c, err := r.git("rev-parse", "HEAD"); err == nil {
		r.commit = c
		// Marked as the go command marks a build from a changed tree.
		if st, err := r.git("status", "--porcelain", "--untracked-files=no"); err != nil || st != "" {
			r.commit += " (modified)"
		}
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		t, err := r.git("log", "-1", "--format=%ct")
		if err != nil {
			return fmt.Errorf("no commit time (%v): set SOURCE_DATE_EPOCH", err)
		}
		epoch = t
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("SOURCE_DATE_EPOCH %q is not a number of seconds", epoch)
	}
	r.mtime = time.Unix(sec, 0).UTC()
	return nil
}

func (r *release) git(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = r.root
	b, err := cmd.Output()
	return strings.TrimSpace(string(b)), err
}

// fileVersion is the version in file names and package metadata: without
// the leading v, as distributions spell it.
func (r *release) fileVersion() string { return strings.TrimPrefix(r.version, "v") }

func (r *release) build() error {
	stage, err := os.MkdirTemp("", "etcdlead-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	var outputs []string
	var all []*bins
	extras := map[string]*extraFiles{}
	for _, arch := range r.arches {
		b, err := r.binaries(stage, arch)
		if err != nil {
			return err
		}
		extra, err := r.extras(stage, b)
		if err != nil {
			return err
		}
		all, extras[arch] = append(all, b), extra
		name, err := r.archive(b, extra)
		if err != nil {
			return err
		}
		outputs = append(outputs, name)
		pkgs, err := r.packages(b, extra)
		if err != nil {
			return err
		}
		outputs = append(outputs, pkgs...)
		sboms, err := r.binarySBOMs(b, extra)
		if err != nil {
			return err
		}
		outputs = append(outputs, sboms...)
	}
	image, digest, err := r.image(all, extras)
	if err != nil {
		return err
	}
	outputs = append(outputs, image...)
	sbom, err := r.imageSBOM(all, extras, digest.String())
	if err != nil {
		return err
	}
	outputs = append(outputs, sbom)
	if err := r.sums(outputs); err != nil {
		return err
	}
	for _, o := range outputs {
		fmt.Println(filepath.Join(r.out, o))
	}
	fmt.Println(filepath.Join(r.out, "SHA256SUMS"))
	return nil
}
