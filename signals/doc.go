// Package signals decides which signals etcdlead catches and what each one
// means. It is the only caller of signal.Notify in etcdlead, so the tables
// below are the whole truth about signal handling: which signals are caught
// (table), and what each does in each phase of a supervisor (decisions,
// through Decide).
//
// It runs in the supervisor and in each keeper process.
package signals
