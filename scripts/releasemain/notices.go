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

// notices writes the third-party notices of the binaries: the license,
// notice and patents files of the Go distribution and of every module
// linked into them, as their build information lists them. The binaries
// are static, so these travel with them: the BSD and MIT licenses among
// them ask that a binary distribution reproduce them.
func (r *release) notices(out string, binaries ...string) error {
	var goVersion string
	mods := map[string]bool{} // path@version
	for _, p := range binaries {
		info, err := buildinfo.ReadFile(p)
		if err != nil {
			return fmt.Errorf("build information of %s: %v", p, err)
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
		return fmt.Errorf("go list -m of the linked modules: %v", err)
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return fmt.Errorf("go env GOROOT: %v", err)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "etcdlead and etcdlead-keeper are static binaries: they hold the Go\n"+
		"standard library and the modules below, whose licenses and notices follow.\n")
	// PATH VERSION DIR, the Go distribution first.
	sections := []string{"Go " + goVersion + " " + strings.TrimSpace(string(goroot))}
	sections = append(sections, strings.Split(strings.TrimSpace(string(listing)), "\n")...)
	for _, s := range sections {
		f := strings.SplitN(s, " ", 3)
		if len(f) != 3 || f[2] == "" {
			return fmt.Errorf("go list -m: %q has no module directory", s)
		}
		texts, err := noticeTexts(f[2])
		if err != nil {
			return err
		}
		if len(texts) == 0 {
			return fmt.Errorf("%s %s ships no license file in %s", f[0], f[1], f[2])
		}
		// The name and version only: the directory is this machine's.
		fmt.Fprintf(&b, "\n================ %s %s ================\n", f[0], f[1])
		for _, t := range texts {
			fmt.Fprintf(&b, "\n%s", t)
		}
	}
	return os.WriteFile(out, []byte(b.String()), 0o644)
}

// noticeTexts are the license and notice files at the top of dir, in the
// order of their names.
func noticeTexts(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var texts []string
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
		texts = append(texts, t)
	}
	return texts, nil
}
