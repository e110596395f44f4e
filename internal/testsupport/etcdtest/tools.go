//go:build tools

// This file is never built. It names the etcd server's main package so that
// `go mod tidy`, which skips testdata/, keeps what ./testdata/etcd needs in
// go.mod and go.sum.
package etcdtest

import _ "go.etcd.io/etcd/server/v3/etcdmain"
