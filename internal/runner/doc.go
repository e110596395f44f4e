// Package runner is the term loop of `etcdlead run`: campaign, start the
// child under its keeper once leading, hold the term while the child runs,
// stop the child when the term ends, and campaign again or end the run
// (docs/design.md, "One term, step by step").
//
// It promises that a term's child is started only after the campaign
// returned the term and under a keeper that carries the term's fence
// deadline; that when the term is lost the child is told to stop before
// anything else happens (a log line can block on a stalled stderr); that
// the child's whole group is gone before the term's lease is revoked; and
// that what a signal means depends only on the phase, decided in one table
// (signals.Decide). Every run ends with an Outcome, which the CLI maps to an
// exit code (internal/cli/exitcode.go).
//
// It does not make the safety argument: at most one child per election
// rests on the campaign's barrier (package campaign) and on each keeper's
// fence (package supervisor). Both are reached through small interfaces
// here, Campaigner and Keepers, so the loop can be tested with fakes.
//
// It runs in the supervisor process (the etcdlead that campaigns), never in a keeper.
package runner
