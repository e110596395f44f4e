// Package testcert makes certificates for tests: a certificate authority and
// the server and client certificates it signs, written as PEM files. Keys are
// ECDSA P-256, which is quick to generate.
package testcert
