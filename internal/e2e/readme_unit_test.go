package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The systemd unit of README.md passes `systemd-analyze verify`: every key
// known and every value parsed. verify refuses a unit whose ExecStart
// binary is absent, so the ExecStart path, and only it, becomes the binary
// under test. .ci/run installs systemd where the tool is missing; on CI a
// missing tool fails the test rather than skipping it.
func TestReadmeSystemdUnitVerifies(t *testing.T) {
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("systemd-analyze is missing: .ci/run installs Debian's systemd package for this test")
		}
		t.Skip("systemd-analyze is missing (apt-get install systemd): the README's unit is not verified")
	}
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n```ini\n")
	unit, _, ok2 := strings.Cut(after, "\n```\n")
	if !ok || !ok2 || !strings.Contains(unit, "[Service]") {
		t.Fatal("README.md has no ```ini block with a [Service] section")
	}
	// A stop ends etcdlead with its child's status, 143 for a child that
	// obeys SIGTERM (TestSdNotify): systemd must count it as a success.
	if !strings.Contains(unit, "\nSuccessExitStatus=143\n") {
		t.Errorf("the README's unit lacks SuccessExitStatus=143:\n%s", unit)
	}
	const readmeExec = "ExecStart=/usr/local/bin/etcdlead "
	if strings.Count(unit, readmeExec) != 1 {
		t.Fatalf("the README's unit has no single %q line:\n%s", readmeExec, unit)
	}
	unit = strings.Replace(unit, readmeExec, "ExecStart="+etcdleadBin()+" ", 1)
	path := filepath.Join(t.TempDir(), "etcdlead-readme.service")
	if err := os.WriteFile(path, []byte(unit+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// verify exits 0 after warnings such as an unknown key or a value it
	// ignores: any output is a finding.
	out, err := exec.Command(tool, "verify", path).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify of the README's unit: %v\n%s\n%s", err, out, unit)
	}
}
