// Package e2e holds the tests that build etcdlead and run the binary
// against real etcd processes: the promise as a user meets it, with real
// signals, real pipes and a blackholing TCP proxy between each supervisor
// and etcd. It also runs the CLI scripts of testdata/script and the chaos
// schedule (scripts/chaos runs the soak). It has no code of its own outside
// its tests.
//
// What it promises: each safety claim of README.md and docs/ has a test
// here or in the package that makes the claim, and overlap is detected
// without timing, by an exclusive flock that every probe child holds while
// it lives.
package e2e
