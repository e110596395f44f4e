// Package etcdtest starts real etcd servers, as separate processes on
// loopback ports chosen at run time, for tests.
//
// The etcd executable is built from ./testdata/etcd (without the race
// detector) on first use and cached under os.UserCacheDir()/etcdlead-test,
// keyed by go.mod, go.sum and the Go version, so test packages share it and
// nothing needs a TestMain. Every process a test starts is killed by the
// test's cleanup, and by the kernel if the test binary dies first.
package etcdtest
