package main

import (
	"path/filepath"
	"testing"
)

// Every break must still apply to the code as it is: a stale anchor is a
// break that tests nothing, and would otherwise be found only when someone
// runs scripts/mutate.
func TestBreaksApply(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range breaks {
		if _, err := b.apply(root); err != nil {
			t.Error(err)
		}
	}
}
