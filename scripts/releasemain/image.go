package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// imageBin is where the image holds both binaries: side by side, as
	// the archive's etcdlead (which looks for its keeper beside itself)
	// wants them, and on every PATH.
	imageBin = "/usr/local/bin"
	// imageUID is the image's unprivileged user and group, etcdlead,
	// given in its /etc/passwd and /etc/group: the number distroless and
	// others use for theirs, above the ranges that distributions hand
	// out, so that it is no one else's on a host or in a base image.
	imageUID = 65532
	// sourceURL is where the image's source is, for its labels.
	sourceURL = "https://github.com/etcdlead/etcdlead"
	// refNameAnnotation tags the index in the layout's index.json, as
	// skopeo's oci:DIR:TAG and oras' DIR:TAG look it up.
	refNameAnnotation = "org.opencontainers.image.ref.name"
)

// imagePlatforms are the OCI platforms of the architectures: arm64 with
// the variant the registries' own images name.
var imagePlatforms = map[string]v1.Platform{
	"amd64": {OS: "linux", Architecture: "amd64"},
	"arm64": {OS: "linux", Architecture: "arm64", Variant: "v8"},
}

// imageName is the OCI image layout's directory in dist/, and, with .tar,
// the same as one file to download.
func (r *release) imageName() string { return fmt.Sprintf("etcdlead_%s_oci", r.fileVersion()) }

// labels are the image's OCI labels, also the index's annotations, where
// registries read them for a multi-platform image.
func (r *release) labels() map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":   "etcdlead",
		"org.opencontainers.image.source":  sourceURL,
		"org.opencontainers.image.version": r.version,
		"org.opencontainers.image.created": r.mtime.Format("2006-01-02T15:04:05Z"),
	}
	if r.commit != "" {
		l["org.opencontainers.image.revision"] = r.commit
	}
	return l
}

// image writes the OCI image layout: an index of one image per
// architecture, tagged with the version, and a tar of the layout (what
// skopeo calls an oci-archive), the form a release page can hold. It
// returns the layout's files and the tar, as paths in dist/, and the
// index's digest.
//
// No daemon and no base image: each image is one layer with the two
// binaries, the licenses and notices the binaries' licenses ask to go
// with them, an /etc/passwd and /etc/group that name the unprivileged
// user, and a /tmp. Every time in it is the release's, so two runs on one
// commit give one digest.
func (r *release) image(all []*bins, extras map[string]*extraFiles) ([]string, v1.Hash, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range all {
		img, err := r.archImage(b, extras[b.arch])
		if err != nil {
			return nil, v1.Hash{}, err
		}
		platform, ok := imagePlatforms[b.arch]
		if !ok {
			return nil, v1.Hash{}, fmt.Errorf("no OCI platform known for %s", b.arch)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &platform},
		})
	}
	idx = mutate.Annotations(idx, r.labels()).(v1.ImageIndex)
	digest, err := idx.Digest()
	if err != nil {
		return nil, v1.Hash{}, err
	}

	dir := filepath.Join(r.out, r.imageName())
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameAnnotation: r.version})); err != nil {
		return nil, v1.Hash{}, err
	}
	var files []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(r.out, path)
		files = append(files, rel)
		return err
	})
	if err != nil {
		return nil, v1.Hash{}, err
	}
	sort.Strings(files)
	tarName, err := r.layoutTar(files)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	return append(files, tarName), digest, nil
}

// archImage is one architecture's image.
func (r *release) archImage(b *bins, e *extraFiles) (v1.Image, error) {
	layerTar, err := r.imageLayer(b, e)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression))
	if err != nil {
		return nil, err
	}
	platform := imagePlatforms[b.arch]
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: platform.Architecture,
		OS:           platform.OS,
		Variant:      platform.Variant,
		Created:      v1.Time{Time: r.mtime},
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			// No Cmd: etcdlead without arguments prints its help and
			// exits 0, and an image built FROM this one sets its own.
			Entrypoint: []string{imageBin + "/etcdlead"},
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			// Unprivileged by default (docs/containers.md, "In a
			// container", says why and when to run as root instead).
			User:       fmt.Sprintf("%d:%d", imageUID, imageUID),
			WorkingDir: "/",
			Labels:     r.labels(),
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: r.mtime},
			CreatedBy: "scripts/release " + r.version,
			Comment:   "etcdlead and etcdlead-keeper for linux/" + b.arch,
		},
	})
}

// imageLayer is the layer's uncompressed tar: entries sorted, owned by
// root, at the release's time.
func (r *release) imageLayer(b *bins, e *extraFiles) ([]byte, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\netcdlead:x:%d:%d:etcdlead:/nonexistent:/sbin/nologin\n", imageUID, imageUID)
	group := fmt.Sprintf("root:x:0:\netcdlead:x:%d:\n", imageUID)
	type entry struct {
		src  string // a file to copy, or
		data []byte // the content; neither for a directory
		mode int64
	}
	bin := imageBin[1:]
	entries := map[string]entry{
		"etc/":                                  {mode: 0o755},
		"etc/passwd":                            {data: []byte(passwd), mode: 0o644},
		"etc/group":                             {data: []byte(group), mode: 0o644},
		"tmp/":                                  {mode: 0o1777},
		"usr/":                                  {mode: 0o755},
		"usr/local/":                            {mode: 0o755},
		bin + "/":                               {mode: 0o755},
		bin + "/etcdlead":                       {src: b.etcdlead, mode: 0o755},
		bin + "/etcdlead-keeper":                {src: b.keeper, mode: 0o755},
		"usr/share/":                            {mode: 0o755},
		"usr/share/doc/":                        {mode: 0o755},
		"usr/share/doc/etcdlead/":               {mode: 0o755},
		"usr/share/doc/etcdlead/LICENSE":        {src: e.license, mode: 0o644},
		"usr/share/doc/etcdlead/" + noticesName: {src: e.notices, mode: 0o644},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		en := entries[name]
		if name[len(name)-1] == '/' {
			if err := tw.WriteHeader(r.tarHeader(name, tar.TypeDir, en.mode, 0)); err != nil {
				return nil, err
			}
			continue
		}
		data := en.data
		if en.src != "" {
			var err error
			if data, err = os.ReadFile(en.src); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(r.tarHeader(name, tar.TypeReg, en.mode, int64(len(data)))); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// layoutTar writes the layout's files, paths in dist/, as one tar whose
// top is the layout (skopeo's oci-archive:FILE:TAG reads it as it is),
// and returns its file name.
func (r *release) layoutTar(files []string) (string, error) {
	name := r.imageName() + ".tar"
	f, err := os.Create(filepath.Join(r.out, name))
	if err != nil {
		return "", err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	dirs := map[string]bool{}
	for _, p := range files {
		rel, err := filepath.Rel(r.imageName(), p)
		if err != nil {
			return "", err
		}
		for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
			dirs[d+"/"] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := tw.WriteHeader(r.tarHeader(d, tar.TypeDir, 0o755, 0)); err != nil {
			return "", err
		}
	}
	for _, p := range files {
		data, err := os.ReadFile(filepath.Join(r.out, p))
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(r.imageName(), p)
		if err := tw.WriteHeader(r.tarHeader(rel, tar.TypeReg, 0o644, int64(len(data)))); err != nil {
			return "", err
		}
		if _, err := tw.Write(data); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	return name, f.Close()
}
