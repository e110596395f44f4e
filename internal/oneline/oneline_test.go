package oneline

import (
	"strings"
	"testing"
	"unicode"
)

func TestQuote(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"web-1/4121", "web-1/4121"},
		{"with space and ünïcode", "with space and ünïcode"},
		{"", ""},
		{"a\nMAINPID=1", `"a\nMAINPID=1"`},
		{"\x1b[2Jreports", `"\x1b[2Jreports"`},
		{"tab\there", `"tab\there"`},
		{"cr\rhere", `"cr\rhere"`},
		{"bidi\u202eexe.txt", `"bidi\u202eexe.txt"`},
		{"bad\xffutf8", `"bad\xffutf8"`},
	} {
		got := Quote(c.in)
		if got != c.want {
			t.Errorf("Quote(%q) = %s, want %s", c.in, got, c.want)
		}
		if strings.ContainsFunc(got, func(r rune) bool { return !unicode.IsPrint(r) }) {
			t.Errorf("Quote(%q) = %q still holds a non-printing character", c.in, got)
		}
	}
}
