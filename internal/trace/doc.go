// Package trace stamps the steps of a handoff for scripts/bench. It is a
// development aid and not an option of etcdlead's. The steps are the
// product's own log lines, most of them at trace level: Hook, the one call
// in each process (internal/logbuf's Logger wraps every logger with it),
// returns the logger unchanged unless the build has the tag
// etcdlead_trace (hooked.go); a released etcdlead has no trace code on any
// path. The bench builds a traced etcdlead for its step tables and times
// the untraced one. In a traced build,
//
//	ETCDLEAD_TRACE=/path/file etcdlead run ...
//
// makes every process of that run (the supervisor and each keeper it
// starts, which inherit the variable) append one line per log call, at
// any level and whether or not the level shows it, to the file:
//
//	<CLOCK_MONOTONIC ns> <pid> <message>
//
// The clock is the one the bench's child stamps, so lines from several
// processes and the child compare directly. The file is opened with
// O_APPEND and each line is a single write(2), so lines of processes that
// write at once interleave whole, never mixed.
//
// It runs in the supervisor and in each keeper process.
package trace
