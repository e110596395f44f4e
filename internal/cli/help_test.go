package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateHelp = flag.Bool("update-help", false, "rewrite testdata/help from the CLI definition")

// TestHelp holds every help text to the one in testdata/help: the library
// renders the templates and drops a template's error silently, so a broken
// template would show only as missing text.
func TestHelp(t *testing.T) {
	for _, topic := range []string{"etcdlead", "run", "status", "resign", "completion", "version", "help"} {
		args := []string{"etcdlead", topic, "--help"}
		if topic == "etcdlead" {
			args = []string{"etcdlead", "--help"}
		}
		got := helpText(t, args...)
		path := filepath.Join("testdata", "help", topic+".txt")
		if *updateHelp {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("%s: help is not %s (regenerate with -update-help if the change is meant):\n%s", strings.Join(args[1:], " "), path, got)
		}
		for i, l := range strings.Split(got, "\n") {
			if len(l) > 80 {
				t.Errorf("%s: line %d is %d columns wide: %q", strings.Join(args[1:], " "), i+1, len(l), l)
			}
		}
		if topic != "etcdlead" && topic != "help" { // help --help is the app's help
			if via := helpText(t, "etcdlead", "help", topic); via != got {
				t.Errorf("help %s is not %s --help:\n%s", topic, topic, via)
			}
		}
	}
	if via := helpText(t, "etcdlead", "help"); via != helpText(t, "etcdlead", "--help") {
		t.Errorf("help is not --help:\n%s", via)
	}
}

func helpText(t *testing.T, args ...string) string {
	t.Helper()
	app := newApp(args)
	var out bytes.Buffer
	app.Writer = &out
	if err := app.Run(args); err != nil {
		t.Fatalf("%s: %v", strings.Join(args[1:], " "), err)
	}
	return out.String()
}
