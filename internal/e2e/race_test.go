//go:build race

package e2e

// raceEnabled says the tests run under the race detector (go test -race).
const raceEnabled = true
