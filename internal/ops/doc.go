// Package ops is what an operator sees of one running candidate: its
// role, health and term for /healthz, /leader, /status and /metrics over
// HTTP, and for systemd (READY=1, STATUS=, the watchdog).
//
// It promises that /leader answers 200 only while this instance leads and
// its command runs, that /healthz and the watchdog report healthy exactly
// while etcd answered this instance (its queueing or a renewal) within one
// TTL, /healthz with a line that says when etcd last did, and that a bad
// --status-addr fails at start rather than later.
//
// It does not decide anything: the campaign and the run loop report to the
// Monitor, and nothing here can start, stop or keep a child. What it shows
// is this instance's own view; `etcdlead status` reads etcd instead.
//
// It runs in the supervisor process (the etcdlead that campaigns), never in a keeper.
package ops
