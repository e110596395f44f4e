// Package oneline makes a value that came from outside (etcd, a flag, an
// error) safe to print where a newline or an escape sequence would forge
// output: a row of a table, a log line, an sd_notify message.
//
// It promises that Quote's result is one line of printable UTF-8, and that
// it differs from its argument only when the argument was not.
//
// It runs in the supervisor and in each keeper process.
package oneline

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Quote is s when s is valid UTF-8 without control, format or other
// non-printing characters (tab and newline included); else s in Go's
// double-quoted form, whose escapes (\n, \x1b, \u202e) show what was there.
func Quote(s string) string {
	if Clean(s) {
		return s
	}
	return strconv.Quote(s)
}

// Clean reports whether s prints as it is, on one line.
func Clean(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
