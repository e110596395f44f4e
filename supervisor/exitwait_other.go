//go:build !linux

package supervisor

func awaitExit(int) {}
