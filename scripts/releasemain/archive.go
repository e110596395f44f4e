package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// completionNames are the scripts' file names in an archive.
var completionNames = map[string]string{
	"bash": "completions/etcdlead.bash",
	"zsh":  "completions/_etcdlead",
	"fish": "completions/etcdlead.fish",
}

// archive writes etcdlead_VERSION_linux_ARCH.tar.gz, everything under a
// directory of that name, and returns its file name.
func (r *release) archive(b *bins, e *extraFiles) (string, error) {
	base := fmt.Sprintf("etcdlead_%s_linux_%s", r.fileVersion(), b.arch)
	entries, names := archiveEntries(base, archiveFiles(b, e))
	data, err := r.tarGz(base, entries, names)
	if err != nil {
		return "", err
	}
	name := base + ".tar.gz"
	return name, os.WriteFile(filepath.Join(r.out, name), data, 0o644)
}

// archiveFiles maps each path in the archive, below its top directory, to
// the file it holds.
func archiveFiles(b *bins, e *extraFiles) map[string]string {
	files := map[string]string{
		"etcdlead":        b.etcdlead,
		"etcdlead-keeper": b.keeper,
		"README.md":       e.readme,
		"LICENSE":         e.license,
		"etcdlead.1":      e.man,
		noticesName:       e.notices,
	}
	for shell, p := range e.completions {
		files[completionNames[shell]] = p
	}
	for _, p := range e.docs {
		files["docs/"+filepath.Base(p)] = p
	}
	return files
}

// archiveEntries are the archive's entries under base, files and the
// directories that hold them, as full path → source, "" for a directory,
// and their full paths in the order they are written.
func archiveEntries(base string, files map[string]string) (map[string]string, []string) {
	entries := map[string]string{base + "/": ""}
	for n, src := range files {
		entries[base+"/"+n] = src
		if d, _, ok := strings.Cut(n, "/"); ok {
			entries[base+"/"+d+"/"] = ""
		}
	}
	var names []string
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names) // a directory sorts before what it holds
	return entries, names
}

// tarGz is the gzipped tar of entries, written in the order of names.
func (r *release) tarGz(base string, entries map[string]string, names []string) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, n := range names {
		if err := r.tarEntry(tw, base, n, entries[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarEntry writes the entry n of the archive under base: a directory when
// src is "", else src's content, executable for the two binaries.
func (r *release) tarEntry(tw *tar.Writer, base, n, src string) error {
	if src == "" {
		return tw.WriteHeader(r.tarHeader(n, tar.TypeDir, 0o755, 0))
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	mode := int64(0o644)
	if rel := strings.TrimPrefix(n, base+"/"); rel == "etcdlead" || rel == "etcdlead-keeper" {
		mode = 0o755
	}
	if err := tw.WriteHeader(r.tarHeader(n, tar.TypeReg, mode, int64(len(data)))); err != nil {
		return err
	}
	_, err = tw.Write(data)
	return err
}

// tarHeader is an entry owned by root (uid/gid 0) at the release's time,
// with nothing of the machine that built it.
func (r *release) tarHeader(name string, typ byte, mode, size int64) *tar.Header {
	return &tar.Header{
		Typeflag: typ,
		Name:     name,
		Mode:     mode,
		Size:     size,
		ModTime:  r.mtime,
		Uname:    "root",
		Gname:    "root",
		Format:   tar.FormatUSTAR,
	}
}

// gzipFile compresses src into dst without a name or time in the header,
// as Debian wants man pages.
func gzipFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	zw.ModTime = time.Time{}
	if _, err := zw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(dst, buf.Bytes(), 0o644)
}

// sums writes SHA256SUMS in sha256sum's format, so that
// `sha256sum -c --ignore-missing SHA256SUMS` checks a download.
func (r *release) sums(names []string) error {
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		f, err := os.Open(filepath.Join(r.out, n))
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%x  %s\n", h.Sum(nil), n)
	}
	return os.WriteFile(filepath.Join(r.out, "SHA256SUMS"), []byte(b.String()), 0o644)
}
