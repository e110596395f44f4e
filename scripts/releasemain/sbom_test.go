package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// TestSBOM reads each SBOM back with the library that wrote it and checks
// it against the binary it describes: the binary's hash, and exactly the
// Go version and modules that `go version -m` lists for it, each module
// with a license text; the image's SBOM against the binaries of both its
// platforms.
func TestSBOM(t *testing.T) {
	need(t, "dpkg-deb")
	dist, _ := releaseTwice(t)
	type described struct{ sbom, binary string }
	var image []string // the binaries the image holds, from its layers
	var each []described
	for _, arch := range []string{"amd64", "arm64"} {
		dir := t.TempDir()
		untar(t, filepath.Join(dist, "etcdlead_0.0.0-test_linux_"+arch+".tar.gz"), dir)
		bin := filepath.Join(dir, "etcdlead_0.0.0-test_linux_"+arch)
		pkg := t.TempDir()
		output(t, "dpkg-deb", "-x", filepath.Join(dist, "etcdlead_0.0.0~test-1_"+arch+".deb"), pkg)
		base := filepath.Join(dist, "etcdlead_0.0.0-test_linux_"+arch+"_")
		each = append(each,
			described{base + "etcdlead.cdx.json", filepath.Join(bin, "etcdlead")},
			described{base + "etcdlead-keeper.cdx.json", filepath.Join(bin, "etcdlead-keeper")},
			described{base + "etcdlead-pkg.cdx.json", filepath.Join(pkg, "usr/bin/etcdlead")})
	}
	for _, d := range each {
		bom := readBOM(t, d.sbom)
		name := filepath.Base(d.sbom)
		subject := bom.Metadata.Component
		if subject == nil || subject.Hashes == nil || (*subject.Hashes)[0].Value != fileSHA256(t, d.binary) {
			t.Errorf("%s: the subject's hash is not that of %s", name, d.binary)
		}
		main, want := goVersionM(t, d.binary)
		if subject.Name != main || subject.Version != testVersion {
			t.Errorf("%s: the subject is %s %s, want %s %s", name, subject.Name, subject.Version, main, testVersion)
		}
		checkComponents(t, name, bom, want)
	}

	bom := readBOM(t, filepath.Join(dist, "etcdlead_0.0.0-test_oci.cdx.json"))
	idx := imageIndex(t, filepath.Join(dist, "etcdlead_0.0.0-test_oci"))
	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		root := extract(t, img)
		image = append(image, filepath.Join(root, "usr/local/bin/etcdlead"), filepath.Join(root, "usr/local/bin/etcdlead-keeper"))
	}
	if s := bom.Metadata.Component; s == nil || s.Type != cdx.ComponentTypeContainer || s.Hashes == nil || (*s.Hashes)[0].Value != digest.Hex {
		t.Errorf("the image's SBOM is not of the index %s: %+v", digest, s)
	}
	want := map[string]bool{}
	hashes := map[string]bool{}
	for _, b := range image {
		_, mods := goVersionM(t, b)
		maps.Copy(want, mods)
		hashes[fileSHA256(t, b)] = true
	}
	for _, c := range *bom.Components {
		if c.Type == cdx.ComponentTypeApplication && c.Hashes != nil {
			delete(hashes, (*c.Hashes)[0].Value)
		}
	}
	if len(hashes) != 0 {
		t.Errorf("the image's SBOM names not every binary of the image: %d missing", len(hashes))
	}
	checkComponents(t, "etcdlead_0.0.0-test_oci.cdx.json", bom, want)
}

// checkComponents checks that the SBOM's libraries are exactly want (as
// path@version), each with a license text.
func checkComponents(t *testing.T, name string, bom *cdx.BOM, want map[string]bool) {
	t.Helper()
	have := map[string]bool{}
	for _, c := range *bom.Components {
		if c.Type != cdx.ComponentTypeLibrary {
			continue
		}
		have[c.Name+"@"+c.Version] = true
		text := ""
		if c.Licenses != nil {
			for _, l := range *c.Licenses {
				if l.License != nil && l.License.Text != nil {
					text += strings.ToLower(l.License.Text.Content)
				}
			}
		}
		if !strings.Contains(text, "license") && !strings.Contains(text, "copyright") {
			t.Errorf("%s: %s %s has no license text", name, c.Name, c.Version)
		}
	}
	for _, m := range slices.Sorted(maps.Keys(want)) {
		if !have[m] {
			t.Errorf("%s names no %s, which go version -m lists", name, m)
		}
	}
	for _, m := range slices.Sorted(maps.Keys(have)) {
		if !want[m] {
			t.Errorf("%s names %s, which go version -m does not list", name, m)
		}
	}
}

// goVersionM is the main module and, as path@version, the Go standard
// library and the modules linked that `go version -m` lists for a binary,
// a replacement in the place of what it replaces.
func goVersionM(t *testing.T, binary string) (string, map[string]bool) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(output(t, "go", "version", "-m", binary)), "\n")
	_, goVersion, _ := strings.Cut(lines[0], ": ")
	var main string
	mods := map[string]bool{"std@" + goVersion: true}
	var last string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		switch {
		case len(f) >= 2 && f[0] == "mod":
			main = f[1]
		case len(f) >= 3 && f[0] == "dep":
			last = f[1] + "@" + f[2]
			mods[last] = true
		case len(f) >= 3 && f[0] == "=>":
			delete(mods, last)
			mods[f[1]+"@"+f[2]] = true
		}
	}
	if main == "" || len(mods) < 2 {
		t.Fatalf("go version -m %s lists no main module or no dependency:\n%s", binary, strings.Join(lines, "\n"))
	}
	return main, mods
}

func readBOM(t *testing.T, path string) *cdx.BOM {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bom := new(cdx.BOM)
	if err := cdx.NewBOMDecoder(f, cdx.BOMFileFormatJSON).Decode(bom); err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	if bom.Metadata == nil || bom.Components == nil || bom.Dependencies == nil {
		t.Fatalf("%s has no metadata, components or dependencies", filepath.Base(path))
	}
	return bom
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// untar writes a .tar.gz's regular files and directories into dir.
func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	writeTar(t, zr, dir)
}

// writeTar writes a tar stream's regular files and directories into dir.
func writeTar(t *testing.T, r io.Reader, dir string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, data, os.FileMode(h.Mode).Perm())
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
