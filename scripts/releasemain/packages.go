package main

import (
	_ "embed"
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
	"github.com/goreleaser/nfpm/v2/rpm"
)

// The unit, the example settings and the hardening drop-in are files of
// this directory, so that a reader finds them where the release is made;
// the test checks the unit and the drop-in with systemd-analyze.
var (
	//go:embed etcdlead@.service
	unitFile []byte
	//go:embed example.env
	exampleEnv []byte
	//go:embed hardening.conf
	hardeningConf []byte
)

// reloadSystemd makes systemd see the template unit on install and forget
// it on removal; on a machine without systemd running it does nothing.
const reloadSystemd = `#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || :
fi
`

// packages writes the .deb and the .rpm of one architecture and returns
// their file names.
func (r *release) packages(b *bins, e *extraFiles) ([]string, error) {
	s, err := r.stagePackageFiles(b, e)
	if err != nil {
		return nil, err
	}
	contents := r.packageContents(b, e, s)
	var names []string
	for _, format := range []struct {
		name string
		p    nfpm.Packager
	}{{"deb", deb.Default}, {"rpm", rpm.DefaultRPM}} {
		name, err := r.writePackage(format.name, format.p, r.info(b.arch, s.script, contents))
		if err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// packageFiles are the paths, in the stage directory, of the files only
// the packages hold, as stagePackageFiles writes them.
type packageFiles struct {
	man, unit, env, hardening, script string
	changelog, copyright, overrides   string // the .deb's only
}

// stagePackageFiles writes the packages' own files into the stage
// directory: the man page gzipped, the embedded files, the install script
// and Debian's files.
func (r *release) stagePackageFiles(b *bins, e *extraFiles) (*packageFiles, error) {
	stage := filepath.Dir(filepath.Dir(b.packaged))
	s := &packageFiles{
		man:       filepath.Join(stage, "etcdlead.1.gz"),
		unit:      filepath.Join(stage, "etcdlead@.service"),
		env:       filepath.Join(stage, "example.env"),
		hardening: filepath.Join(stage, "hardening.conf"),
		script:    filepath.Join(stage, "reload-systemd.sh"),
	}
	if err := gzipFile(e.man, s.man); err != nil {
		return nil, err
	}
	for p, data := range map[string][]byte{s.unit: unitFile, s.env: exampleEnv, s.hardening: hardeningConf, s.script: []byte(reloadSystemd)} {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return nil, err
		}
	}
	var err error
	if s.changelog, s.copyright, s.overrides, err = r.debianFiles(stage); err != nil {
		return nil, err
	}
	return s, nil
}

// packageContents lists every file and directory the packages install,
// in the order the packagers are given them.
func (r *release) packageContents(b *bins, e *extraFiles, s *packageFiles) files.Contents {
	contents := files.Contents{
		r.file(b.packaged, "/usr/bin/etcdlead", "", 0o755),
		r.file(b.keeper, keeperDir+"/etcdlead-keeper", "", 0o755),
		r.file(s.unit, "/usr/lib/systemd/system/etcdlead@.service", "", 0o644),
		r.file(s.env, "/etc/etcdlead/example.env", files.TypeConfigNoReplace, 0o644),
		r.file(s.man, "/usr/share/man/man1/etcdlead.1.gz", "", 0o644),
		r.file(e.readme, "/usr/share/doc/etcdlead/README.md", "", 0o644),
		r.file(s.hardening, "/usr/share/doc/etcdlead/hardening.conf", "", 0o644),
		r.pkgFile("deb", s.changelog, "/usr/share/doc/etcdlead/changelog.Debian.gz", "", 0o644),
		r.pkgFile("deb", s.copyright, "/usr/share/doc/etcdlead/copyright", "", 0o644),
		r.pkgFile("deb", s.overrides, "/usr/share/lintian/overrides/etcdlead", "", 0o644),
		r.pkgFile("rpm", e.license, "/usr/share/licenses/etcdlead/LICENSE", files.TypeRPMLicense, 0o644),
		r.pkgFile("deb", e.notices, "/usr/share/doc/etcdlead/"+noticesName, "", 0o644),
		r.pkgFile("rpm", e.notices, "/usr/share/licenses/etcdlead/"+noticesName, files.TypeRPMLicense, 0o644),
	}
	// README.md's links into docs/ hold beside it.
	for _, p := range e.docs {
		contents = append(contents, r.file(p, "/usr/share/doc/etcdlead/docs/"+filepath.Base(p), "", 0o644))
	}
	// dpkg owns every directory its package's archive holds; rpm only the
	// ones listed, and removes no directory it does not own.
	for _, dir := range []string{"/etc/etcdlead", keeperDir, "/usr/share/doc/etcdlead", "/usr/share/doc/etcdlead/docs", "/usr/share/licenses/etcdlead"} {
		contents = append(contents, r.pkgFile("rpm", "", dir, files.TypeDir, 0o755))
	}
	return append(contents, r.completionContents(e)...)
}

// completionContents are the shell completion scripts, each where its
// shell looks for them.
func (r *release) completionContents(e *extraFiles) files.Contents {
	var contents files.Contents
	if p, ok := e.completions["bash"]; ok {
		contents = append(contents, r.file(p, "/usr/share/bash-completion/completions/etcdlead", "", 0o644))
	}
	if p, ok := e.completions["zsh"]; ok {
		// Debian's zsh reads vendor-completions, Fedora's site-functions.
		contents = append(contents,
			r.pkgFile("deb", p, "/usr/share/zsh/vendor-completions/_etcdlead", "", 0o644),
			r.pkgFile("rpm", p, "/usr/share/zsh/site-functions/_etcdlead", "", 0o644))
	}
	if p, ok := e.completions["fish"]; ok {
		contents = append(contents, r.file(p, "/usr/share/fish/vendor_completions.d/etcdlead.fish", "", 0o644))
	}
	return contents
}

// writePackage writes one format's package of info into the output
// directory under the packager's conventional name and returns that name.
func (r *release) writePackage(format string, p nfpm.Packager, info *nfpm.Info) (string, error) {
	if err := nfpm.PrepareForPackager(info, format); err != nil {
		return "", err
	}
	name := p.ConventionalFileName(info)
	f, err := os.Create(filepath.Join(r.out, name))
	if err != nil {
		return "", err
	}
	err = p.Package(info, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	return name, nil
}

// info is the package's metadata; a fresh one per format, because
// PrepareForPackager rewrites its contents for that format.
func (r *release) info(arch, script string, contents files.Contents) *nfpm.Info {
	var c files.Contents
	for _, f := range contents {
		cp := *f
		fi := *f.FileInfo
		cp.FileInfo = &fi
		c = append(c, &cp)
	}
	info := &nfpm.Info{
		Name:        "etcdlead",
		Arch:        arch,
		Platform:    "linux",
		Version:     r.version,
		Release:     packageRelease,
		Section:     "admin",
		Priority:    "optional",
		Maintainer:  maintainer,
		Description: "runs a command only while this process leads an election in etcd\nStarted on many machines, exactly one runs the command; when that one\nstops, crashes, is cut off from etcd or loses its key, another takes over,\nand never two copies of the command run at once.",
		Vendor:      "etcdlead",
		Homepage:    homepage,
		License:     "Apache-2.0",
		MTime:       r.mtime,
		Overridables: nfpm.Overridables{
			Contents: c,
			Umask:    0o022,
			Scripts:  nfpm.Scripts{PostInstall: script, PostRemove: script},
			RPM: nfpm.RPM{
				Group:     "System Environment/Daemons",
				BuildHost: "etcdlead-release",
			},
		},
	}
	return nfpm.WithDefaults(info)
}

func (r *release) file(src, dst, typ string, mode os.FileMode) *files.Content {
	return r.pkgFile("", src, dst, typ, mode)
}

// pkgFile is a file for one packager only ("" for both), owned by root at
// the release's time.
func (r *release) pkgFile(packager, src, dst, typ string, mode os.FileMode) *files.Content {
	return &files.Content{
		Source:      src,
		Destination: dst,
		Type:        typ,
		Packager:    packager,
		FileInfo:    &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode, MTime: r.mtime},
	}
}
