package main

func init() { breaks = append(breaks, modelBreaks...) }

// modelBreaks are breaks of the new term protocol's model
// (campaign/model): each is a rule of the protocol that the exhaustive
// search must show is needed, by finding two children alive once it is
// gone. The record's mod-revision compare at its removal is not among
// them: without the operator's edits of records, the bounded case, no one
// but the term's own enqueue writes a record, so the compare never fails.
var modelBreaks = []breakage{
	{
		name: "model: the hold after a raft change", file: "campaign/model/new_test.go",
		why: "a waiter takes away a record of a term granted before a raft change as soon as its lease is gone, beside the swept term's child",
		old: "\tif n.raft > c.xG {\n",
		new: "\tif false {\n",
		pkg: "./campaign/model", tests: "^TestNewProtocolKeepsThePromise$",
	},
	{
		name: "model: μ", file: "campaign/model/model_test.go",
		why: "the hold after a raft change is the record's TTL only, not ET more: a renewal a stale raft leader credits after the sweep moves the swept term's fence past it",
		old: "\tmu = et + m ",
		new: "\tmu = m ",
		pkg: "./campaign/model", tests: "^TestNewProtocolKeepsThePromise$",
	},
	{
		name: "model: the start read counts records", file: "campaign/model/new_test.go",
		why: "a record with neither queue key nor sentinel counts for nothing: a swept term is forgotten with its keys",
		old: "ls.rev >= R || !ls.q && !ls.s && !ls.rec {\n",
		new: "ls.rev >= R || !ls.q && !ls.s {\n",
		pkg: "./campaign/model", tests: "^TestNewProtocolKeepsThePromise$",
	},
	{
		name: "model: end after the child is gone", file: "campaign/model/new_test.go",
		why: "a term's end deletes its record and keys while its child is still being stopped",
		old: "\tif !s.noChild(i) {\n\t\treturn\n\t}\n",
		new: "",
		pkg: "./campaign/model", tests: "^TestNewProtocolKeepsThePromise$",
	},
	{
		name: "model: the record's raft term", file: "campaign/model/steps_test.go",
		why: "the record names the raft term at the enqueue, not the one known before the grant: a change in between goes unseen, and the swept term's record is taken away at once",
		old: "ls.rec, ls.recMod, ls.recG = true, r, ls.g\n",
		new: "ls.rec, ls.recMod, ls.recG = true, r, n.raft\n",
		pkg: "./campaign/model", tests: "^TestNewProtocolKeepsThePromise$",
	},
	{
		name: "model: no fork past the deadline", file: "campaign/model/steps_test.go",
		why: "the keeper forks a child of a term whose deadline passed, whose lease etcd may have ended and whose record a successor took away",
		old: "\tif c.d == 0 {\n\t\tcfg.stop(&n, i)\n",
		new: "\tif false {\n\t\tcfg.stop(&n, i)\n",
		pkg: "./campaign/model", tests: "^TestNewProtocolKeepsThePromise$",
	},
}
