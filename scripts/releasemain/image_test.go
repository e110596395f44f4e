package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestImage reads the release's OCI image layout back as a registry
// client would: one index, tagged with the version, of an image for
// linux/amd64 and one for linux/arm64, each a single layer with both
// binaries, of their platform, at /usr/local/bin, the entrypoint, the
// labels and the unprivileged user; the same index digest from a second
// run; and the amd64 image's etcdlead, taken out of its layer, running
// `version`, and, as PID 1 of a PID namespace as in a container, a child,
// whose exit status it returns.
func TestImage(t *testing.T) {
	dist, again := releaseTwice(t)
	name := "etcdlead_0.0.0-test_oci"
	idx := imageIndex(t, filepath.Join(dist, name))
	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if digest2, err := imageIndex(t, filepath.Join(again, name)).Digest(); err != nil || digest2 != digest {
		t.Errorf("two runs on one commit give the index digests %s and %s (%v)", digest, digest2, err)
	}

	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	head := strings.TrimSpace(output(t, "git", "-C", "../..", "rev-parse", "HEAD"))
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		epoch = strings.TrimSpace(output(t, "git", "-C", "../..", "log", "-1", "--format=%ct"))
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Unix(sec, 0).UTC()
	for k, want := range map[string]string{
		"org.opencontainers.image.source":  "https://github.com/etcdlead/etcdlead",
		"org.opencontainers.image.version": testVersion,
	} {
		if im.Annotations[k] != want {
			t.Errorf("index annotation %s=%q, want %q", k, im.Annotations[k], want)
		}
	}
	platforms := map[string]bool{}
	var amd64 v1.Image
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		platforms[d.Platform.String()] = true
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if d.Platform.Architecture == "amd64" {
			amd64 = img
		}
		checkImage(t, img, d.Platform.Architecture, head, created)
	}
	if len(platforms) != 2 || !platforms["linux/amd64"] || !platforms["linux/arm64/v8"] {
		t.Fatalf("the index's platforms are %v, want linux/amd64 and linux/arm64/v8", platforms)
	}

	root := extract(t, amd64)
	etcdlead := filepath.Join(root, "usr/local/bin/etcdlead")
	if v := output(t, etcdlead, "version"); !strings.HasPrefix(v, "etcdlead version "+testVersion+"\n") {
		t.Errorf("etcdlead version, from the image:\n%s", v)
	}
	t.Run("pid1", func(t *testing.T) { checkPID1(t, etcdlead) })
}

// imageIndex is the index that the layout's index.json tags with the
// version, as `skopeo copy oci:DIR:VERSION` and `crane push DIR` find it.
func imageIndex(t *testing.T, dir string) v1.ImageIndex {
	t.Helper()
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() ||
		m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != testVersion {
		t.Fatalf("%s/index.json does not hold one index tagged %s: %+v", dir, testVersion, m.Manifests)
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// checkImage checks one platform's image: its configuration, and its
// single layer's entries, at the release's time created.
func checkImage(t *testing.T, img v1.Image, arch, head string, created time.Time) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if strings.Join(c.Entrypoint, " ") != "/usr/local/bin/etcdlead" || len(c.Cmd) != 0 {
		t.Errorf("%s: entrypoint %q and cmd %q, want [/usr/local/bin/etcdlead] and none", arch, c.Entrypoint, c.Cmd)
	}
	if c.User != "65532:65532" {
		t.Errorf("%s: user %q, want 65532:65532", arch, c.User)
	}
	if !cf.Created.Time.Equal(created) {
		t.Errorf("%s: created %s, want the commit's time %s", arch, cf.Created.Time, created)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.source":  "https://github.com/etcdlead/etcdlead",
		"org.opencontainers.image.version": testVersion,
	} {
		if c.Labels[k] != want {
			t.Errorf("%s: label %s=%q, want %q", arch, k, c.Labels[k], want)
		}
	}
	if rev := c.Labels["org.opencontainers.image.revision"]; !strings.HasPrefix(rev, head) {
		t.Errorf("%s: label org.opencontainers.image.revision=%q, want the commit %s", arch, rev, head)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%s: %d layers, want 1", arch, len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	found := map[string]*tar.Header{}
	contents := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(created) {
			t.Errorf("%s: %s is owned by %d:%d at %s, want 0:0 at %s", arch, h.Name, h.Uid, h.Gid, h.ModTime, created)
		}
		found[h.Name] = h
		if contents[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
	for _, bin := range []string{"usr/local/bin/etcdlead", "usr/local/bin/etcdlead-keeper"} {
		h := found[bin]
		if h == nil || h.Typeflag != tar.TypeReg || h.Mode != 0o755 {
			t.Errorf("%s: %s is %+v, want a file of mode 0755", arch, bin, h)
			continue
		}
		info, err := buildinfo.Read(bytes.NewReader(contents[bin]))
		if err != nil {
			t.Fatalf("%s: %s: %v", arch, bin, err)
		}
		for _, s := range info.Settings {
			if s.Key == "GOARCH" && s.Value != arch {
				t.Errorf("the %s image's %s is built for %s", arch, bin, s.Value)
			}
		}
	}
	if !bytes.Contains(contents["etc/passwd"], []byte("\netcdlead:x:65532:65532:")) ||
		!bytes.Contains(contents["etc/group"], []byte("\netcdlead:x:65532:")) {
		t.Errorf("%s: no user and group etcdlead 65532 in /etc/passwd and /etc/group:\n%s\n%s", arch, contents["etc/passwd"], contents["etc/group"])
	}
	if !bytes.Contains(contents["usr/share/doc/etcdlead/"+noticesName], []byte("\n================ Go ")) {
		t.Errorf("%s: the image holds no third-party notices", arch)
	}
}

// extract writes img's file system, as mutate.Extract flattens it, into
// a directory.
func extract(t *testing.T, img v1.Image) string {
	t.Helper()
	root := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	writeTar(t, rc, root)
	return root
}

// checkPID1 runs the image's etcdlead as a container runtime runs its
// entrypoint, PID 1 of a new PID namespace with its own /proc, against an
// etcd of its own, with a child that exits 7 only if PID 1 is that
// etcdlead. The etcd is the server the main module's tests run
// (testdata/etcd, at the version go.mod pins), built here from there, so
// this module takes no etcd dependency of its own.
func checkPID1(t *testing.T, etcdlead string) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("a PID namespace needs root, and CI runs as root")
		}
		t.Skip("a PID namespace needs root: not running etcdlead from the image as PID 1")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is missing: %v", err)
	}
	endpoint := startEtcd(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script := `case "$(tr '\0' ' ' </proc/1/cmdline)" in */usr/local/bin/etcdlead\ run\ *) exit 7 ;; esac
echo "PID 1 is: $(tr '\0' ' ' </proc/1/cmdline)" >&2; exit 3`
	// --kill-child: should the test give up, unshare's end kills PID 1,
	// and with it the whole namespace.
	cmd := exec.CommandContext(ctx, unshare, "--pid", "--fork", "--mount-proc", "--kill-child",
		etcdlead, "run", "--endpoints="+endpoint, "--election=image-pid1", "--id=pid1", "--once",
		"--", "/bin/sh", "-c", script)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err = cmd.Run()
	t.Logf("etcdlead run as PID 1:\n%s", stderr.Bytes())
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("etcdlead as PID 1 ended with %v, want its child's exit status 7", err)
	}
	// The image holds the keeper beside etcdlead, where this build looks.
	if bytes.Contains(stderr.Bytes(), []byte("the keeper is a re-exec of this binary")) {
		t.Errorf("etcdlead from the image did not find its keeper beside it")
	}
}

// startEtcd starts a one-member etcd on loopback ports free when chosen,
// stopped and removed at the test's end, and returns its client URL once
// it serves.
func startEtcd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "etcd")
	build := exec.Command("go", "build", "-race=false", "-o", bin, "./testdata/etcd")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/etcd: %v\n%s", err, out)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		ports := freeLoopbackPorts(t, 2)
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		var log bytes.Buffer
		cmd := exec.Command(bin, "--name", "m", "--data-dir", t.TempDir(),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", "m="+peer, "--log-level", "error", "--unsafe-no-fsync")
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		if lastErr = waitHealthy(client, exited); lastErr == nil {
			return client
		}
		_ = cmd.Process.Kill()
		<-exited
		t.Logf("etcd on %s did not start (%v):\n%s", client, lastErr, log.Bytes())
	}
	t.Fatalf("no etcd started: %v", lastErr)
	return ""
}

// waitHealthy asks etcd's /health until it answers that it is, or etcd
// exits, or a minute has gone by.
func waitHealthy(client string, exited <-chan struct{}) error {
	deadline := time.After(time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := http.Get(client + "/health")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte(`"health":"true"`)) {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("etcd exited")
		case <-deadline:
			return errors.New("not healthy after a minute")
		case <-tick.C:
		}
	}
}

// freeLoopbackPorts are n loopback ports the kernel had free a moment ago,
// held open together so that it hands out none twice.
func freeLoopbackPorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
