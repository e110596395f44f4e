// Package cli is etcdlead's command line: one file per command (run,
// status, resign, completion), the flags and their environment variables,
// the parsing of every option into a checked configuration, and the
// exit-code table.
//
// It promises that bad input ends with one line that names the problem and
// the fix, and exit code 125, before anything is started: no campaign, no
// lease, no child; that COMMAND is resolved before campaigning (126, 127);
// that a flag on the command line outranks its environment variable; and
// that the exit code of every end is decided in one function, exitCode,
// which follows README.md's "Exit codes" table row for row.
//
// It makes no safety decision: the term loop is internal/runner, the
// barrier package campaign, the fence package supervisor.
//
// It runs in the supervisor process (the etcdlead that campaigns), never in a keeper.
package cli
