package keeper

import "testing"

// Given every value, the keeper's arguments parse (the refusals of each
// missing one are tested on a real keeper: supervisor/keeper_linux_test.go).
func TestKeeperArgsComplete(t *testing.T) {
	if _, err := parseKeeperArgs([]string{"-path", "/bin/true", "-signal", "15", "-kill-timeout", "1s", "-fence-margin", "100ms", "--", "true"}); err != nil {
		t.Errorf("keeper with every value refused: %v", err)
	}
}
