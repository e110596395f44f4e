// Package etcdwire is how a term's requests reach etcd when a member is
// frozen, cut off or slow: the transport under package campaign, which
// decides nothing of the protocol.
//
// What it promises: Renewals sends every lease renewal of a client on one
// LeaseKeepAlive stream and credits each answer to the send it answers,
// so that the send time it returns never runs later than the renewal etcd
// applied; a quiet stream is replaced on another member and lives on while
// an attempt waits on it. Stream is a watch stream that is asked for
// progress and replaced, its watches opened again from where they stood,
// when it answers nothing within its bound, so that a silent member
// delays an event by at most that bound. Hedged sends a read again while
// it is unanswered. Its own requests (the renewal stream, a stream's probe
// and progress questions) carry require-leader metadata; the caller's
// watches and reads carry what the caller's contexts do.
//
// What it does not promise: any cadence or bound of its own; the caller
// gives each (campaign/timing.go). It imports nothing of campaign's and
// starts no processes. It runs in the supervisor process.
package etcdwire
