package main

import (
	"archive/zip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const modulePath = "github.com/etcdlead/etcdlead"

// TestModuleVersion installs etcdlead as `go install …@VERSION` does for a
// user, offline: from a file-based GOPROXY that holds this checkout's
// tracked files as the module at a test version, its dependencies from the
// module cache's download directory. An unstamped module build must show
// the module version.
func TestModuleVersion(t *testing.T) {
	gomodcache := strings.TrimSpace(output(t, "go", "env", "GOMODCACHE"))
	proxy := filepath.Join(t.TempDir(), "proxy")
	writeProxy(t, proxy)

	gobin := t.TempDir()
	cmd := exec.Command("go", "install", "-trimpath", "-tags", "urfave_cli_no_docs", modulePath+"@"+testVersion)
	cmd.Env = append(os.Environ(),
		"GOBIN="+gobin,
		"GOPROXY=file://"+proxy+",file://"+filepath.Join(gomodcache, "cache", "download"),
		"GOMODCACHE="+t.TempDir(), // a fresh one, never a stale copy of the test version
		"GOFLAGS=-modcacherw",     // so that the test can remove it
		"GOSUMDB=off", "GONOSUMDB=*", "GOPRIVATE=", "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s@%s: %v\n%s", modulePath, testVersion, err, out)
	}
	version := output(t, filepath.Join(gobin, "etcdlead"), "--version")
	t.Logf("etcdlead --version of the module build:\n%s", version)
	if !strings.HasPrefix(version, "etcdlead version "+testVersion+"\n") {
		t.Errorf("a module build at %s says:\n%s", testVersion, version)
	}
}

// writeProxy lays out a GOPROXY directory holding the module at
// testVersion: list, .info, .mod and a zip of the tracked files, without
// this nested module (a module zip never holds another module).
func writeProxy(t *testing.T, proxy string) {
	t.Helper()
	dir := filepath.Join(proxy, modulePath, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"list":                testVersion + "\n",
		testVersion + ".info": `{"Version":"` + testVersion + `","Time":"2026-01-01T00:00:00Z"}`,
		testVersion + ".mod":  string(gomod),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(filepath.Join(dir, testVersion+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	files := strings.Split(strings.TrimSpace(output(t, "git", "-C", "../..", "ls-files")), "\n")
	// A directory with a go.mod of its own (this one, deploy/kubernetes)
	// is another module, which the module's zip leaves out, as the proxy's
	// would.
	var nested []string
	for _, name := range files {
		if dir, ok := strings.CutSuffix(name, "/go.mod"); ok {
			nested = append(nested, dir+"/")
		}
	}
	for _, name := range files {
		if slices.ContainsFunc(nested, func(dir string) bool { return strings.HasPrefix(name, dir) }) {
			continue
		}
		data, err := os.ReadFile(filepath.Join("../..", name))
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet in git
		}
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create(modulePath + "@" + testVersion + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}
