// Package etcdconn makes the etcd client etcdlead's commands share, and
// turns etcd's refusals into one line that names the problem and the fix.
//
// It promises a client that has not talked to etcd when New returns: New
// fails only on bad configuration (a file that cannot be read, a client
// certificate out of its validity period, credentials in an endpoint URL),
// never because etcd is unreachable, so the caller decides what an outage
// means. Refusals a retry cannot mend (a certificate etcd does not accept,
// a wrong password, a missing permission) come back from requests as errors
// that campaign.Permanent recognises, and still unwrap to etcd's own
// errors. It logs in lazily and keeps its token until etcd rejects it, so a
// lease renewal does not cost etcd a login.
//
// It does not retry, and it does not decide whether an error ends a run:
// that is the caller's.
//
// It runs in the supervisor process (the etcdlead that campaigns), never in a keeper.
package etcdconn
