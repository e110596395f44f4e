package cli

import "testing"

// BenchmarkParseRunArgs is a run's command line, parsed and checked: on
// the path of every start, before etcd is asked (named.go says what it
// cost before the flags' names were computed once).
func BenchmarkParseRunArgs(b *testing.B) {
	for b.Loop() {
		if _, err := parseRunArgs([]string{"--endpoints=127.0.0.1:2379", "--election=e"}); err != nil {
			b.Fatal(err)
		}
	}
}
