package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/etcdconn"
	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/internal/oneline"
)

// candidateJSON is one candidate of an election, as `status --json` prints it.
type candidateJSON struct {
	ID    string `json:"id"`
	Key   string `json:"key"`
	Rev   int64  `json:"rev"`
	Lease string `json:"lease"`
	// TTL is the leader's remaining lease TTL in seconds (leader only).
	TTL *int64 `json:"ttl_seconds,omitempty"`
	// Slot is the slot a holder took (--holders > 1), once it took one.
	Slot *int `json:"slot,omitempty"`
	// Containment is what holds the candidate's child together, cgroup or
	// process-group, as its term recorded it (none from an etcdlead that records none).
	Containment string `json:"containment,omitempty"`
	// Health is the verdict of the command's health check (--health-cmd,
	// --health-url), as its term last recorded it.
	Health *campaign.HealthRecord `json:"health,omitempty"`
}

// role words a holder's role with its command's health, if recorded.
func (c candidateJSON) role(role string) string {
	if c.Health != nil {
		return role + " (command " + oneline.Quote(c.Health.Status) + ")"
	}
	return role
}

// electionJSON is one election. The shape is stable: fields are only added.
type electionJSON struct {
	Election string          `json:"election"`
	Prefix   string          `json:"prefix"`
	Leader   *candidateJSON  `json:"leader"`
	Waiting  []candidateJSON `json:"waiting"`
	// Skipped counts keys under the election's prefixes that are no
	// term's (put by hand or by another program, a nested election).
	Skipped int `json:"skipped_keys"`
	// Older counts earlier terms whose lease still lives without a queue
	// key: the leader starts its command only once they are gone.
	Older int `json:"older_terms"`
	// Holders is --holders of the election's terms, when more than one;
	// Holding then lists the first Holders candidates of the queue, the
	// leader first, and Waiting those after them.
	Holders int             `json:"holders,omitempty"`
	Holding []candidateJSON `json:"holding,omitempty"`
	// Paused is the election's pause (etcdlead pause), when it is paused.
	Paused *pauseJSON `json:"paused,omitempty"`
}

// pauseJSON is an election's pause: who paused it, when and why. A pause
// key whose value is no record etcdlead writes pauses all the same: Raw
// then holds the value.
type pauseJSON struct {
	By     string `json:"by,omitempty"`
	At     string `json:"at,omitempty"`
	Reason string `json:"reason,omitempty"`
	Raw    string `json:"raw,omitempty"`
}

func pauseOf(kv *mvccpb.KeyValue) *pauseJSON {
	if kv == nil {
		return nil
	}
	rec, ok := campaign.ParsePause(kv.Value)
	if !ok {
		return &pauseJSON{Raw: string(kv.Value)}
	}
	p := &pauseJSON{By: rec.By, Reason: rec.Reason}
	if !rec.At.IsZero() {
		p.At = rec.At.UTC().Format(time.RFC3339)
	}
	return p
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the leader and the waiting candidates (exit 0 with a leader, 3 without)",
		Description: "Without --election, every election under --prefix is shown. --json prints one\n" +
			"election object with --election, else {\"elections\": [...]}.",
		Flags: append(electionFlags(), &cli.BoolFlag{Name: flagJSON, Category: catOutput, Usage: "print JSON"},
			&cli.BoolFlag{Name: flagWatch, Category: catOutput, Usage: "with --election: print the state, then a line on each change, until SIGINT or SIGTERM"}),
		OnUsageError:       usageError,
		CustomHelpTemplate: commandHelp(statusExamples, statusExitCodes),
		Action:             statusAction,
	}
}

const statusExamples = `  etcdlead status --election=reports
  etcdlead status --json | jq -r '.elections[].leader.id'
`

const statusExitCodes = `  0        a leader exists
  3        no leader
  125      options, configuration, etcd
`

func statusAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return failf("status takes no arguments, got %q: see etcdlead status --help", c.Args().First())
	}
	// One election's layout, or the prefix of all of them.
	var one *campaign.Layout
	prefix, err := optText(c, flagPrefix, "a key prefix", "to use "+defaultPrefix)
	if err != nil {
		return err
	}
	if prefix, err = campaign.NormalPrefix(prefix); err != nil {
		return inFlags(err)
	}
	election, err := optText(c, flagElection, "an election name", "to show every election")
	if err != nil {
		return err
	}
	if election != "" {
		l, err := campaign.NewLayout(prefix, election)
		if err != nil {
			return inFlags(err)
		}
		one = &l
	}
	if c.Bool(flagWatch) && one == nil {
		return failf("--watch follows one election: give --election NAME")
	}
	cc, err := parseConn(c)
	if err != nil {
		return err
	}
	cli, err := etcdconn.New(cc)
	if err != nil {
		return err
	}
	defer cli.Close()
	if c.Bool(flagWatch) {
		return watchStatus(c, cli, *one, cc.DialTimeout)
	}
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(c.Context), cc.DialTimeout)
	defer cancel()
	els, err := readElections(ctx, cli, prefix, one)
	if err != nil {
		return etcdFailed("status", cc, err)
	}
	if c.Bool(flagJSON) {
		err = printJSON(os.Stdout, els, one != nil)
	} else {
		err = printTable(os.Stdout, els)
	}
	if err != nil {
		return failf("status: %v", err)
	}
	for _, e := range els {
		if e.Leader != nil {
			return nil
		}
	}
	return withCode(exitcode.NoLeader, nil)
}

// readElections reads the candidates of one election, or of all under
// prefix when one is nil, in queue order, and the leaders' remaining TTLs. Keys that are
// no term's are counted, not shown.
func readElections(ctx context.Context, cli *clientv3.Client, prefix string, one *campaign.Layout) ([]electionJSON, error) {
	var found []campaign.Election
	if one != nil {
		e, _, err := campaign.ReadElection(ctx, cli, *one)
		if err != nil {
			return nil, err
		}
		found = append(found, e)
	} else {
		var err error
		if found, err = campaign.ReadElections(ctx, cli, prefix); err != nil {
			return nil, err
		}
	}
	els := []electionJSON{}
	for _, e := range found {
		slots, err := e.ReadSlots(ctx, cli)
		if err != nil {
			return nil, err
		}
		el := electionOf(e, slots)
		// The holders' TTLs, a request each: the first is the leader.
		for i, kv := range e.Queue[:min(len(e.Queue), e.Holders())] {
			ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
			if err != nil {
				return nil, err
			}
			if i == 0 {
				el.Leader.TTL = &ttl.TTL
			}
			if el.Holding != nil {
				el.Holding[i].TTL = &ttl.TTL
			}
		}
		els = append(els, el)
	}
	return els, nil
}

// electionOf is an election as --json shows it, without the holders'
// TTLs, which take a request each. slots maps the leases of slot keys to
// their slots; nil shows none.
func electionOf(e campaign.Election, slots map[int64]int) electionJSON {
	el := electionJSON{Election: e.Name, Prefix: e.Layout.Prefix(), Waiting: []candidateJSON{}, Skipped: e.Skipped, Older: e.Older(),
		Paused: pauseOf(e.Pause)}
	holders := e.Holders()
	if holders > 1 {
		el.Holders, el.Holding = holders, []candidateJSON{}
	}
	contained := map[int64]string{}
	for _, kv := range e.Queue {
		if r := e.RecordOf(kv.Lease); r != nil {
			rec, _ := campaign.ParseRecord(r.Value)
			contained[kv.Lease] = rec.Containment
		}
	}
	for i, kv := range e.Queue {
		cand := candidateJSON{ID: string(kv.Value), Key: string(kv.Key), Rev: kv.CreateRevision, Lease: fmt.Sprintf("%x", kv.Lease),
			Containment: contained[kv.Lease]}
		if h, ok := e.Health[kv.Lease]; ok {
			cand.Health = &h
		}
		if i >= holders {
			el.Waiting = append(el.Waiting, cand)
			continue
		}
		if s, ok := slots[kv.Lease]; ok && holders > 1 {
			cand.Slot = &s
		}
		if i == 0 {
			leader := cand
			el.Leader = &leader
		}
		if holders > 1 {
			el.Holding = append(el.Holding, cand)
		}
	}
	return el
}

func printJSON(w io.Writer, els []electionJSON, one bool) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if one {
		return enc.Encode(els[0])
	}
	if els == nil {
		els = []electionJSON{}
	}
	return enc.Encode(struct {
		Elections []electionJSON `json:"elections"`
	}{els})
}

// printTable prints ids, keys and names as etcd holds them only when they
// are one printable line, else quoted with Go's escapes: a value written
// by another tool, or before --id was checked, must not forge a row or
// send escape sequences to the terminal (--json escapes them its own way).
func printTable(w io.Writer, els []electionJSON) error {
	q := oneline.Quote
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ELECTION\tROLE\tID\tREV\tTTL\tKEY")
	for _, e := range els {
		if e.Leader == nil {
			fmt.Fprintf(tw, "%s\t(no leader)\t\t\t\t\n", q(e.Election))
			continue
		}
		for _, h := range e.Holding {
			role := "holder (no slot yet)"
			if h.Slot != nil {
				role = fmt.Sprintf("holder, slot %d", *h.Slot)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%ds\t%s\n", q(e.Election), h.role(role), q(h.ID), h.Rev, *h.TTL, q(h.Key))
		}
		if l := e.Leader; e.Holders == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%ds\t%s\n", q(e.Election), l.role("leader"), q(l.ID), l.Rev, *l.TTL, q(l.Key))
		}
		for i, c := range e.Waiting {
			fmt.Fprintf(tw, "%s\twaiting %d\t%s\t%d\t\t%s\n", q(e.Election), i+1, q(c.ID), c.Rev, q(c.Key))
		}
	}
	for _, e := range els {
		if p := e.Paused; p != nil {
			what := fmt.Sprintf("paused by %s at %s: %s", q(p.By), p.At, q(p.Reason))
			if p.Raw != "" || p.By == "" {
				what = "paused: " + q(p.Raw)
			}
			fmt.Fprintf(tw, "%s\t(%s)\t\t\t\t\n", q(e.Election), what)
		}
		if e.Older > 0 {
			fmt.Fprintf(tw, "%s\t(%d older term(s) whose lease lives: the leader waits for them)\t\t\t\t\n", q(e.Election), e.Older)
		}
		if e.Skipped > 0 {
			fmt.Fprintf(tw, "%s\t(%d key(s) skipped: no candidate's)\t\t\t\t\n", q(e.Election), e.Skipped)
		}
	}
	return tw.Flush()
}
