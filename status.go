package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// candidateJSON is one candidate of an election, as `status --json` prints it.
type candidateJSON struct {
	ID    string `json:"id"`
	Key   string `json:"key"`
	Rev   int64  `json:"rev"`
	Lease string `json:"lease"`
	// TTL is the leader's remaining lease TTL in seconds (leader only).
	TTL *int64 `json:"ttl_seconds,omitempty"`
}

// electionJSON is one election. The shape is stable: fields are only added.
type electionJSON struct {
	Election string          `json:"election"`
	Prefix   string          `json:"prefix"`
	Leader   *candidateJSON  `json:"leader"`
	Waiting  []candidateJSON `json:"waiting"`
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the leader and the waiting candidates (exit 0 with a leader, 3 without)",
		Description: "Without --election, every election under --prefix is shown. --json prints one\n" +
			"election object with --election, else {\"elections\": [...]}.",
		Flags:        append(electionFlags(), &cli.BoolFlag{Name: flagJSON, Usage: "print JSON"}),
		OnUsageError: usageError,
		Action:       statusAction,
	}
}

func statusAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return failf("status takes no arguments, got %q: see etcdlead status --help", c.Args().First())
	}
	election := c.String(flagElection)
	if election != "" {
		if _, err := electionName(election, ""); err != nil {
			return err
		}
	}
	cc, err := parseConn(c)
	if err != nil {
		return err
	}
	cli, err := newClient(cc)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(c.Context), cc.dialTimeout)
	defer cancel()
	els, err := readElections(ctx, cli, normalPrefix(c.String(flagPrefix)), election)
	if err != nil {
		return failf("status: %v", err)
	}
	if c.Bool(flagJSON) {
		err = printJSON(os.Stdout, els, election != "")
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
	return withCode(exitNoLeader, nil)
}

func normalPrefix(p string) string {
	if p != "" && !strings.HasSuffix(p, "/") {
		return p + "/"
	}
	return p
}

// readElections reads the candidates of one election, or of all under
// prefix, in queue order, and the leaders' remaining TTLs.
func readElections(ctx context.Context, cli *clientv3.Client, prefix, election string) ([]electionJSON, error) {
	from := prefix
	if election != "" {
		from = prefix + election + "/"
	}
	resp, err := cli.Get(ctx, from, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	var els []electionJSON
	index := map[string]int{}
	if election != "" {
		els = append(els, electionJSON{Election: election, Prefix: prefix + election, Waiting: []candidateJSON{}})
		index[election] = 0
	}
	for _, kv := range resp.Kvs {
		name, _, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
		if !ok || strings.Contains(name, "/") {
			continue // not a candidate key (a resign request, say)
		}
		i, seen := index[name]
		if !seen {
			i = len(els)
			index[name] = i
			els = append(els, electionJSON{Election: name, Prefix: prefix + name, Waiting: []candidateJSON{}})
		}
		cand := candidateJSON{ID: string(kv.Value), Key: string(kv.Key), Rev: kv.CreateRevision, Lease: fmt.Sprintf("%x", kv.Lease)}
		if els[i].Leader == nil {
			ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
			if err != nil {
				return nil, err
			}
			cand.TTL = &ttl.TTL
			els[i].Leader = &cand
			continue
		}
		els[i].Waiting = append(els[i].Waiting, cand)
	}
	return els, nil
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

func printTable(w io.Writer, els []electionJSON) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ELECTION\tROLE\tID\tREV\tTTL\tKEY")
	for _, e := range els {
		if e.Leader == nil {
			fmt.Fprintf(tw, "%s\t(no leader)\t\t\t\t\n", e.Election)
			continue
		}
		l := e.Leader
		fmt.Fprintf(tw, "%s\tleader\t%s\t%d\t%ds\t%s\n", e.Election, l.ID, l.Rev, *l.TTL, l.Key)
		for i, c := range e.Waiting {
			fmt.Fprintf(tw, "%s\twaiting %d\t%s\t%d\t\t%s\n", e.Election, i+1, c.ID, c.Rev, c.Key)
		}
	}
	return tw.Flush()
}
