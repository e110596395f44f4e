package main

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestUsage runs scripts/release as a user does: -h answers on stdout and
// exits 0; a call without a VERSION exits 1 with the usage on stderr.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		exit     int
		toStdout bool
	}{
		{[]string{"-h"}, 0, true},
		{[]string{"--help"}, 0, true},
		{nil, 1, false},
		{[]string{"-no-such-flag", "v1.2.3"}, 1, false},
	} {
		cmd := exec.Command("../release", tc.args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		exit := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			exit = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		usage := stderr.String()
		if tc.toStdout {
			usage = stdout.String()
		}
		if exit != tc.exit || !strings.HasPrefix(usage, "usage: scripts/release ") {
			t.Errorf("scripts/release %q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.args, exit, tc.exit, stdout.Bytes(), stderr.Bytes())
		}
	}
}
