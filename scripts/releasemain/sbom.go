package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/uuid"
)

// sbomSpec is the CycloneDX version the SBOMs are written in: the newest
// the common consumers read, where the library's default is newer.
const sbomSpec = cdx.SpecVersion1_6

// sbomBinary is a binary an SBOM describes.
type sbomBinary struct {
	name string // etcdlead or etcdlead-keeper
	path string // the built file
	arch string
}

// binarySBOMs writes an SBOM of each of one architecture's binaries and
// returns their file names: the archive's and the image's etcdlead, the
// packages' (which differs by the keeper directory stamped in), and the
// keeper, which all share.
func (r *release) binarySBOMs(b *bins, e *extraFiles) ([]string, error) {
	base := fmt.Sprintf("etcdlead_%s_linux_%s_", r.fileVersion(), b.arch)
	var names []string
	for _, s := range []struct {
		file string
		bin  sbomBinary
	}{
		{"etcdlead", sbomBinary{"etcdlead", b.etcdlead, b.arch}},
		{"etcdlead-pkg", sbomBinary{"etcdlead", b.packaged, b.arch}},
		{"etcdlead-keeper", sbomBinary{"etcdlead-keeper", b.keeper, b.arch}},
	} {
		c, deps, comps, err := r.binaryComponent(s.bin, e.linked)
		if err != nil {
			return nil, err
		}
		bom := r.newBOM(c, comps, append(deps, cdx.Dependency{Ref: c.BOMRef, Dependencies: refsOf(comps)}))
		name := base + s.file + ".cdx.json"
		if err := writeBOM(filepath.Join(r.out, name), bom); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// imageSBOM writes the SBOM of the image index: its binaries, one pair
// per platform, and what each links. It returns its file name.
func (r *release) imageSBOM(all []*bins, extras map[string]*extraFiles, digest string) (string, error) {
	ref := "pkg:oci/etcdlead@" + strings.ReplaceAll(digest, ":", "%3A") + "?tag=" + url.QueryEscape(r.version)
	subject := cdx.Component{
		BOMRef:     ref,
		Type:       cdx.ComponentTypeContainer,
		Name:       "etcdlead",
		Version:    r.version,
		PackageURL: ref,
		Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: strings.TrimPrefix(digest, "sha256:")}},
		Licenses:   ownLicense(),
		Properties: &[]cdx.Property{{Name: "etcdlead:oci:layout", Value: r.imageName()}},
	}
	var binaries []cdx.Component
	var deps []cdx.Dependency
	seen := map[string]bool{}
	var libs []cdx.Component
	for _, b := range all {
		for _, bin := range []sbomBinary{{"etcdlead", b.etcdlead, b.arch}, {"etcdlead-keeper", b.keeper, b.arch}} {
			c, d, comps, err := r.binaryComponent(bin, extras[b.arch].linked)
			if err != nil {
				return "", err
			}
			// One module is one component, however many binaries link
			// it; a binary's bom-ref must differ per platform.
			c.BOMRef = "linux/" + b.arch + imageBin + "/" + bin.name
			*c.Properties = append(*c.Properties, cdx.Property{Name: "etcdlead:oci:path", Value: imageBin + "/" + bin.name})
			binaries = append(binaries, c)
			deps = append(deps, cdx.Dependency{Ref: c.BOMRef, Dependencies: refsOf(comps)})
			for _, l := range comps {
				if !seen[l.BOMRef] {
					seen[l.BOMRef] = true
					libs = append(libs, l)
				}
			}
			for _, dd := range d {
				if !slices.ContainsFunc(deps, func(x cdx.Dependency) bool { return x.Ref == dd.Ref }) {
					deps = append(deps, dd)
				}
			}
		}
	}
	slices.SortFunc(libs, func(a, b cdx.Component) int { return strings.Compare(a.BOMRef, b.BOMRef) })
	deps = append(deps, cdx.Dependency{Ref: subject.BOMRef, Dependencies: refsOf(binaries)})
	bom := r.newBOM(subject, append(binaries, libs...), deps)
	name := r.imageName() + ".cdx.json"
	return name, writeBOM(filepath.Join(r.out, name), bom)
}

// binaryComponent describes a binary from its own build information: the
// main module at the release's version, with the file's hash and the build
// settings, and, as components, the Go standard library and every module
// linked, each with its go.sum hash and the license files it ships
// (e.linked, which the notices hold too). deps are the components' own
// entries in the dependency graph, which build information does not give:
// each with no dependencies listed.
func (r *release) binaryComponent(bin sbomBinary, mods []linked) (cdx.Component, []cdx.Dependency, []cdx.Component, error) {
	info, err := buildinfo.ReadFile(bin.path)
	if err != nil {
		return cdx.Component{}, nil, nil, fmt.Errorf("build information of %s: %v", bin.path, err)
	}
	c, err := r.mainComponent(bin, info)
	if err != nil {
		return cdx.Component{}, nil, nil, err
	}
	comps, err := linkedComponents(info, mods)
	if err != nil {
		return cdx.Component{}, nil, nil, err
	}
	var deps []cdx.Dependency
	for _, l := range comps {
		deps = append(deps, cdx.Dependency{Ref: l.BOMRef})
	}
	return c, deps, comps, nil
}

// mainComponent is the binary itself: its main module at the release's
// version, one bom-ref per binary, with the file's hash and the build
// settings.
func (r *release) mainComponent(bin sbomBinary, info *debug.BuildInfo) (cdx.Component, error) {
	data, err := os.ReadFile(bin.path)
	if err != nil {
		return cdx.Component{}, err
	}
	sum := sha256.Sum256(data)
	qualifiers := "?type=module&goos=linux&goarch=" + bin.arch
	props := buildProperties(bin, info)
	return cdx.Component{
		BOMRef:     purl(info.Main.Path, r.version) + qualifiers + "&binary=" + bin.name,
		Type:       cdx.ComponentTypeApplication,
		Name:       info.Main.Path,
		Version:    r.version,
		PackageURL: purl(info.Main.Path, r.version) + qualifiers,
		Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(sum[:])}},
		Licenses:   ownLicense(),
		Properties: &props,
	}, nil
}

// buildProperties are the binary's name, its package and its build
// settings: the target's under CycloneDX's names, the others under
// etcdlead's.
func buildProperties(bin sbomBinary, info *debug.BuildInfo) []cdx.Property {
	props := []cdx.Property{
		{Name: "cdx:gomod:binary:name", Value: bin.name},
		{Name: "etcdlead:go:package", Value: info.Path},
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "GOOS", "GOARCH", "CGO_ENABLED":
			props = append(props, cdx.Property{Name: "cdx:gomod:build:env:" + s.Key, Value: s.Value})
		default:
			props = append(props, cdx.Property{Name: "etcdlead:go:build:" + s.Key, Value: s.Value})
		}
	}
	return props
}

// linkedComponents are what the binary links: the Go standard library,
// then every module in build information's order, each with the license
// files mods found for it.
func linkedComponents(info *debug.BuildInfo, mods []linked) ([]cdx.Component, error) {
	texts := map[string][]noticeText{}
	for _, m := range mods {
		texts[m.path+"@"+m.version] = m.texts
	}
	goTexts, ok := texts["Go@"+info.GoVersion]
	if !ok {
		return nil, fmt.Errorf("no license found for Go %s", info.GoVersion)
	}
	comps := []cdx.Component{{
		BOMRef:      purl("std", info.GoVersion),
		Type:        cdx.ComponentTypeLibrary,
		Name:        "std",
		Version:     info.GoVersion,
		Description: "the Go standard library and runtime",
		PackageURL:  purl("std", info.GoVersion),
		Licenses:    licensesOf(goTexts),
	}}
	for _, d := range info.Deps {
		c, err := moduleComponent(d, texts)
		if err != nil {
			return nil, err
		}
		comps = append(comps, c)
	}
	return comps, nil
}

// moduleComponent is one linked module, as its replacement when replaced,
// with its go.sum hash and its license files from texts (by path@version).
func moduleComponent(d *debug.Module, texts map[string][]noticeText) (cdx.Component, error) {
	props := []cdx.Property{}
	if d.Replace != nil {
		props = append(props, cdx.Property{Name: "etcdlead:go:replaces", Value: d.Path + "@" + d.Version})
		d = d.Replace
	}
	if d.Sum != "" {
		// go.sum's h1: hash, of the module's files, not of one
		// archive, so not a hash CycloneDX has a name for.
		props = append(props, cdx.Property{Name: "etcdlead:go:sum", Value: d.Sum})
	}
	t, ok := texts[d.Path+"@"+d.Version]
	if !ok {
		return cdx.Component{}, fmt.Errorf("no license found for %s %s", d.Path, d.Version)
	}
	return cdx.Component{
		BOMRef:     purl(d.Path, d.Version),
		Type:       cdx.ComponentTypeLibrary,
		Name:       d.Path,
		Version:    d.Version,
		PackageURL: purl(d.Path, d.Version),
		Licenses:   licensesOf(t),
		Properties: &props,
	}, nil
}

// newBOM is a BOM of subject whose serial number is a UUID from the
// subject's hash: two runs on one commit write the same file, and two
// different builds never share one.
func (r *release) newBOM(subject cdx.Component, comps []cdx.Component, deps []cdx.Dependency) *cdx.BOM {
	bom := cdx.NewBOM()
	bom.SerialNumber = "urn:uuid:" + uuid.NewSHA1(uuid.NameSpaceURL, []byte(subject.BOMRef+" "+(*subject.Hashes)[0].Value)).String()
	bom.Metadata = &cdx.Metadata{
		Timestamp: r.mtime.Format("2006-01-02T15:04:05Z"),
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication, Name: "scripts/release", Version: r.version,
			Description: "etcdlead's release build (scripts/releasemain)",
		}}},
		Component: &subject,
	}
	bom.Components = &comps
	bom.Dependencies = &deps
	return bom
}

func writeBOM(path string, bom *cdx.BOM) error {
	var buf bytes.Buffer
	enc := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.EncodeVersion(bom, sbomSpec); err != nil {
		return fmt.Errorf("%s: %v", filepath.Base(path), err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// licensesOf are a module's license and notice files, their text as
// shipped: the files the notices reproduce. Named by file, not by an SPDX
// identifier, because nothing here classifies a text.
func licensesOf(texts []noticeText) *cdx.Licenses {
	var ls cdx.Licenses
	for _, t := range texts {
		ls = append(ls, cdx.LicenseChoice{License: &cdx.License{
			Name: t.name,
			Text: &cdx.AttachedText{ContentType: "text/plain", Content: t.text},
		}})
	}
	return &ls
}

// ownLicense is etcdlead's: LICENSE, the Apache License 2.0.
func ownLicense() *cdx.Licenses {
	return &cdx.Licenses{{License: &cdx.License{ID: "Apache-2.0"}}}
}

// purl is a Go module's package URL: pkg:golang/PATH@VERSION, each
// segment escaped as the purl specification asks (a version's + too).
func purl(path, version string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "pkg:golang/" + strings.Join(segs, "/") + "@" + strings.ReplaceAll(url.PathEscape(version), "+", "%2B")
}

func refsOf(comps []cdx.Component) *[]string {
	refs := make([]string, len(comps))
	for i, c := range comps {
		refs[i] = c.BOMRef
	}
	return &refs
}
