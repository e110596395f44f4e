package cli

import (
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestElectionName(t *testing.T) {
	for _, c := range []struct{ given, command, want, err string }{
		{"", "./worker", "worker", ""},
		{"", "/usr/local/bin/backup-db", "backup-db", ""},
		{"jobs", "sh", "jobs", ""},
		{"", "sh", "", "--election"},
		{"", "/bin/bash", "", "--election"},
		{"", "python3.12", "", "--election"},
		{"", "node", "", "--election"},
		{"", "env", "", "--election"},
		{"a/b", "x", "", "may not contain '/'"},
		{"a b", "x", "", "may not contain '/'"},
		{"a\x01", "x", "", "unprintable"},
	} {
		got, err := electionName(c.given, c.command)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("electionName(%q, %q) = %q, %v; want error with %q", c.given, c.command, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("electionName(%q, %q) = %q, %v; want %q", c.given, c.command, got, err, c.want)
		}
	}
}

func TestParseEndpoints(t *testing.T) {
	good := map[string][]string{
		"127.0.0.1:2379":                      {"127.0.0.1:2379"},
		"http://a:1, https://b:2":             {"http://a:1", "https://b:2"},
		"[::1]:2379":                          {"[::1]:2379"},
		"https://etcd.example.internal:2379/": {"https://etcd.example.internal:2379/"},
	}
	for in, want := range good {
		got, err := parseEndpoints(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseEndpoints(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", ",", "a:1,,b:2", "localhost", "ftp://a:1", "http://", "a:0", "a:99999", "http://a:1/path", ":2379"} {
		if got, err := parseEndpoints(in); err == nil {
			t.Errorf("parseEndpoints(%q) = %v, want an error", in, got)
		}
	}
}

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "int": syscall.SIGINT, "HUP": syscall.SIGHUP, "9": syscall.SIGKILL} {
		if got, err := parseSignal(in); err != nil || got != want {
			t.Errorf("parseSignal(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "SIGNOPE", "0", "99"} {
		if _, err := parseSignal(in); err == nil {
			t.Errorf("parseSignal(%q) accepted", in)
		}
	}
}

func TestChildBaseEnvDropsSecretsAndElection(t *testing.T) {
	env := childBaseEnv([]string{
		"PATH=/bin", "ETCDLEAD_PASSWORD=s", "ETCDCTL_PASSWORD=s", "DB_PASSWORD=s", "ETCDCTL_USER=root:s",
		"ETCDLEAD_ELECTION=parent", "ETCDLEAD_PREFIX=p/", "ETCDLEAD_REV=1", "ETCDLEAD_TTL=5s",
		"ETCDLEAD_ID=parent-id", "ETCDLEAD_ENDPOINTS=x:1",
	})
	if want := []string{"PATH=/bin", "ETCDLEAD_TTL=5s"}; !slices.Equal(env, want) {
		t.Fatalf("childBaseEnv =\n%q\nwant\n%q", env, want)
	}
	// A user name alone is no secret.
	if env := childBaseEnv([]string{"ETCDCTL_USER=root"}); len(env) != 1 {
		t.Fatalf("ETCDCTL_USER without a password was dropped: %q", env)
	}
}
