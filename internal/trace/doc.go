// Package trace stamps the steps of a handoff for scripts/bench. It is a
// development aid and not an option of etcdlead's: marks are compiled in
// only with the build tag etcdlead_trace (trace.go); without it every
// function here is empty (off.go), so a released etcdlead has no trace
// code on any path. The bench builds a traced etcdlead for its step
// tables and times the untraced one. In a traced build,
//
//	ETCDLEAD_TRACE=/path/file etcdlead run ...
//
// makes every process of that run (the supervisor and each keeper it
// starts) append one line per mark to the file:
//
//	<CLOCK_MONOTONIC ns> <pid> <event> [key=value]
//
// The clock is the one the bench's child stamps, so marks from several
// processes and the child compare directly. The file is opened with O_APPEND
// and each mark is a single write(2) of a whole line, so lines of processes
// that write at once interleave whole, never mixed.
//
// The variable is read once, when the package is initialised, and removed
// from the process's environment then: a keeper gets it only because its
// supervisor passes it on (Environ), and a child never does.
//
// It runs in the supervisor and in each keeper process.
package trace
