package main

import (
	"debug/buildinfo"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// noticesName is the third-party notices' file name, in the archives and
// the packages.
const noticesName = "THIRD-PARTY-NOTICES"

// noticeFile matches the files a module ships its license and notices in.
var noticeFile = regexp.MustCompile(`(?i)^(licen[cs]e|copying|notice|patents)([._-].*)?$`)

// linked is the Go distribution or a module linked into the binaries,
// as their build information names it, with the license and notice files
// it ships.
type linked struct {
	path, version string // "Go" and go1.x.y for the distribution
	texts         []noticeText
}

// noticeText is one license or notice file of a module.
type noticeText struct {
	name, text string
}

// linkedModules finds the Go distribution and every module linked into the
// binaries, with their license and notice files: what the notices
// reproduce and the SBOMs name. A module that ships none is an error, so
// that no binary goes out with a license missing.
func (r *release) linkedModules(binaries ...string) ([]linked, error) {
	var goVersion string
	mods := map[string]bool{} // path@version
	for _, p := range binaries {
		info, err := buildinfo.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("build information of %s: %v", p, err)
		}
		goVersion = info.GoVersion
		for _, d := range info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			mods[d.Path+"@"+d.Version] = true
		}
	}
	queries := slices.Sorted(maps.Keys(mods))
	cmd := exec.Command("go", append([]string{"list", "-m", "-f", "{{.Path}} {{.Version}} {{.Dir}}"}, queries...)...)
	cmd.Dir = r.root
	cmd.Stderr = os.Stderr
	listing, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m of the linked modules: %v", err)
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOROOT: %v", err)
	}
	// PATH VERSION DIR, the Go distribution first.
	sections := []string{"Go " + goVersion + " " + strings.TrimSpace(string(goroot))}
	sections = append(sections, strings.Split(strings.TrimSpace(string(listing)), "\n")...)
	var all []linked
	for _, s := range sections {
		f := strings.SplitN(s, " ", 3)
		if len(f) != 3 || f[2] == "" {
			return nil, fmt.Errorf("go list -m: %q has no module directory", s)
		}
		texts, err := noticeTexts(f[2])
		if err != nil {
			return nil, err
		}
		if len(texts) == 0 {
			return nil, fmt.Errorf("%s %s ships no license file in %s", f[0], f[1], f[2])
		}
		all = append(all, linked{path: f[0], version: f[1], texts: texts})
	}
	return all, nil
}

// writeNotices writes the third-party notices of the binaries: the license,
// notice and patents files of the Go distribution and of every module
// linked into them. The binaries are static, so these travel with them:
// the BSD and MIT licenses among them ask that a binary distribution
// reproduce them.
func writeNotices(out string, mods []linked) error {
	var b strings.Builder
	fmt.Fprintf(&b, "etcdlead and etcdlead-keeper are static binaries: they hold the Go\n"+
		"standard library and the modules below, whose licenses and notices follow.\n")
	for _, m := range mods {
		// The name and version only: the directory is this machine's.
		fmt.Fprintf(&b, "\n================ %s %s ================\n", m.path, m.version)
		for _, t := range m.texts {
			fmt.Fprintf(&b, "\n%s", t.text)
		}
	}
	return os.WriteFile(out, []byte(b.String()), 0o644)
}

// noticeTexts are the license and notice files at the top of dir, in the
// order of their names.
func noticeTexts(dir string) ([]noticeText, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var texts []noticeText
	for _, e := range entries { // sorted by name
		if !e.Type().IsRegular() || !noticeFile.MatchString(e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		t := string(data)
		if !strings.HasSuffix(t, "\n") {
			t += "\n"
		}
		texts = append(texts, noticeText{e.Name(), t})
	}
	return texts, nil
}
