package main

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/goreleaser/nfpm/v2"
)

// What Debian's policy asks of a binary package beyond its files, which
// lintian checks (release_test.go runs it): a changelog, a copyright file
// in the machine-readable format that points at the system's copy of the
// license, and the reasons for what the package does against lintian's
// defaults.

const (
	maintainer = "etcdlead maintainers <etcdlead@users.noreply.github.com>"
	homepage   = "https://github.com/etcdlead/etcdlead"
	// packageRelease is the packaging's own revision of an upstream version.
	packageRelease = "1"
)

//go:embed lintian-overrides
var lintianOverrides []byte

// debVersion is the version as the .deb's control file spells it, which
// its changelog's newest entry must carry: nfpm's control template, with
// a pre-release after a tilde so that it sorts before the release.
func (r *release) debVersion() string {
	info := nfpm.WithDefaults(&nfpm.Info{Version: r.version, Release: packageRelease})
	v := info.Version
	if info.Prerelease != "" {
		v += "~" + info.Prerelease
	}
	if info.VersionMetadata != "" {
		v += "+" + info.VersionMetadata
	}
	return v + "-" + info.Release
}

// debChangelog is changelog.Debian: one entry, this release's, dated with
// the release's time so that two runs on one commit write the same bytes.
func (r *release) debChangelog() string {
	return fmt.Sprintf(`etcdlead (%s) unstable; urgency=medium

  * Upstream release %s, packaged by scripts/release.
    Its changes: %s/releases

 -- %s  %s
`, r.debVersion(), r.version, homepage, maintainer, r.mtime.Format("Mon, 02 Jan 2006 15:04:05 -0700"))
}

// debCopyright is the copyright file in Debian's machine-readable format
// (copyright-format 1.0), the license by reference to common-licenses, as
// policy 12.5 wants for a license Debian ships.
func (r *release) debCopyright() string {
	return fmt.Sprintf(`Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: etcdlead
Upstream-Contact: %s
Source: %s

Files: *
Copyright: %s The etcdlead authors
License: Apache-2.0
Comment: etcdlead and etcdlead-keeper are static Go binaries: they also
 hold the Go standard library and the Go modules that go version -m lists
 for them, each under its own license; their licenses and notices are in
 /usr/share/doc/etcdlead/THIRD-PARTY-NOTICES.

License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the "License");
 you may not use this file except in compliance with the License.
 You may obtain a copy of the License at
 .
     https://www.apache.org/licenses/LICENSE-2.0
 .
 Unless required by applicable law or agreed to in writing, software
 distributed under the License is distributed on an "AS IS" BASIS,
 WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 See the License for the specific language governing permissions and
 limitations under the License.
 .
 On Debian systems, the complete text of the Apache License, Version 2.0
 can be found in "/usr/share/common-licenses/Apache-2.0".
`, maintainer, homepage, r.copyrightYears())
}

// copyrightYears runs from the first commit's year to the release's.
func (r *release) copyrightYears() string {
	last := r.mtime.Format("2006")
	first, err := r.git("log", "--reverse", "--format=%cd", "--date=format:%Y")
	first, _, _ = strings.Cut(first, "\n")
	if err != nil || first == "" || first >= last {
		return last
	}
	return first + "-" + last
}

// debianFiles writes the changelog (compressed, as policy 12.7 wants), the
// copyright file and the lintian overrides into stage and returns their
// paths.
func (r *release) debianFiles(stage string) (changelog, copyright, overrides string, err error) {
	plain := filepath.Join(stage, "changelog.Debian")
	changelog = plain + ".gz"
	copyright = filepath.Join(stage, "copyright")
	overrides = filepath.Join(stage, "lintian-overrides")
	for p, data := range map[string][]byte{
		plain:     []byte(r.debChangelog()),
		copyright: []byte(r.debCopyright()),
		overrides: lintianOverrides,
	} {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return "", "", "", err
		}
	}
	return changelog, copyright, overrides, gzipFile(plain, changelog)
}
