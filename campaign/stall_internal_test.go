package campaign

import (
	"testing"
	"time"
)

// The stall bound starts at r, doubles for each stream in a row that
// answers nothing, never passes T/2, and after an answer is twice what the
// answer took: a slow link settles on one stream instead of replacing one
// after another, and a fast one comes back to r.
func TestNextBound(t *testing.T) {
	ttl := 2 * time.Second // r = 200ms
	var got []time.Duration
	b := stallBound(ttl)
	for range 4 {
		b = nextBound(ttl, b, -1)
		got = append(got, b)
	}
	want := []time.Duration{400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("bounds after streams that answered nothing: %v, want %v", got, want)
		}
	}
	for _, c := range []struct{ bound, took, want time.Duration }{
		{time.Second, 700 * time.Millisecond, time.Second},                       // a slow answer: twice it, capped at T/2
		{800 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond}, // twice what it took
		{time.Second, 5 * time.Millisecond, 200 * time.Millisecond},              // a fast answer: back to r
	} {
		if b := nextBound(ttl, c.bound, c.took); b != c.want {
			t.Errorf("after an answer in %v (bound %v): %v, want %v", c.took, c.bound, b, c.want)
		}
	}
}
