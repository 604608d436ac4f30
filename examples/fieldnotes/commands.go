package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

func runInit(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("init", "init DB", stdout)
	pos, err := fs.parse(args, "DB")
	if err != nil {
		return err
	}
	a, err := openApp(ctx, pos[0], nil, false)
	if err != nil {
		return err
	}
	defer a.close()
	if err := a.migrate(ctx); err != nil {
		return err
	}
	b, err := a.balance(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "initialized %s: wallet %d cents\n", pos[0], b)
	return nil
}

func runPay(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("pay", "pay DB [--document ID]", stdout)
	doc := fs.String("document", "document-7", "the document to pay for")
	pos, err := fs.parse(args, "DB")
	if err != nil {
		return err
	}
	a, err := openApp(ctx, pos[0], nil, true)
	if err != nil {
		return err
	}
	defer a.close()
	p, err := a.purchase(ctx, *doc, "")
	if err != nil {
		return fmt.Errorf("pay: %w", err)
	}
	fmt.Fprintln(stdout, p.PaymentID)
	return nil
}

// jobView is one line of the jobs listing: the job record's own fields,
// plus how many receipts the sink holds for the job.
type jobView struct {
	ID          string                `json:"id"`
	State       errandtype.JobState   `json:"state"`
	Attempt     int                   `json:"attempt"`
	MaxAttempts int                   `json:"max_attempts"`
	Replays     int                   `json:"replays"`
	LastError   *errandtype.LastError `json:"last_error"`
	Receipts    int                   `json:"receipts"`
}

func runJobs(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("jobs", "jobs DB [--json]", stdout)
	asJSON := fs.Bool("json", false, "print a JSON array")
	pos, err := fs.parse(args, "DB")
	if err != nil {
		return err
	}
	a, err := openApp(ctx, pos[0], nil, true)
	if err != nil {
		return err
	}
	defer a.close()
	counts, err := a.receiptCounts(ctx)
	if err != nil {
		return err
	}
	views := []jobView{}
	params := &errand.ListOpts{Kind: receiptKind, Limit: 100}
	for {
		js, err := a.client.List(ctx, params)
		if err != nil {
			return err
		}
		for _, j := range js {
			views = append(views, jobView{ID: j.ID, State: j.State, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
				Replays: j.Replays, LastError: j.LastError, Receipts: counts[j.ID]})
		}
		if len(js) < params.Limit {
			break
		}
		params.AfterSeq = js[len(js)-1].Seq
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(views)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tATTEMPT\tMAX_ATTEMPTS\tREPLAYS\tRECEIPTS\tLAST_ERROR")
	for _, v := range views {
		last := "-"
		if v.LastError != nil {
			last = v.LastError.Class + ": " + v.LastError.Message
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", v.ID, v.State, v.Attempt, v.MaxAttempts, v.Replays, v.Receipts, last)
	}
	return tw.Flush()
}

// receipt is one row of the sink.
type receipt struct {
	JobID       string `json:"job_id"`
	PaymentID   string `json:"payment_id"`
	DocumentID  string `json:"document_id"`
	AmountCents int64  `json:"amount_cents"`
	Attempt     int    `json:"attempt"`
	DeliveredAt string `json:"delivered_at"`
}

func (a *app) receipts(ctx context.Context) ([]receipt, error) {
	rows, err := a.db.QueryContext(ctx, `SELECT job_id, payment_id, document_id, amount_cents, attempt, delivered_at
		FROM receipts ORDER BY delivered_at, job_id`)
	if err != nil {
		return nil, fmt.Errorf("read receipts: %w", err)
	}
	defer rows.Close()
	rs := []receipt{}
	for rows.Next() {
		var r receipt
		if err := rows.Scan(&r.JobID, &r.PaymentID, &r.DocumentID, &r.AmountCents, &r.Attempt, &r.DeliveredAt); err != nil {
			return nil, fmt.Errorf("read receipts: %w", err)
		}
		rs = append(rs, r)
	}
	return rs, rows.Err()
}

func (a *app) receiptCounts(ctx context.Context) (map[string]int, error) {
	rs, err := a.receipts(ctx)
	if err != nil {
		return nil, err
	}
	m := make(map[string]int, len(rs))
	for _, r := range rs {
		m[r.JobID]++
	}
	return m, nil
}

func runReceipts(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("receipts", "receipts DB [--json]", stdout)
	asJSON := fs.Bool("json", false, "print a JSON array")
	pos, err := fs.parse(args, "DB")
	if err != nil {
		return err
	}
	a, err := openApp(ctx, pos[0], nil, true)
	if err != nil {
		return err
	}
	defer a.close()
	rs, err := a.receipts(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(rs)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB_ID\tPAYMENT_ID\tDOCUMENT_ID\tAMOUNT_CENTS\tATTEMPT\tDELIVERED_AT")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", r.JobID, r.PaymentID, r.DocumentID, r.AmountCents, r.Attempt, r.DeliveredAt)
	}
	return tw.Flush()
}

func runReplay(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("replay", "replay DB JOB_ID [--reason TEXT]", stdout)
	reason := fs.String("reason", "manual replay", "why the job is replayed, kept in errand's replay audit")
	pos, err := fs.parse(args, "DB", "JOB_ID")
	if err != nil {
		return err
	}
	if strings.TrimSpace(*reason) == "" {
		return usagef("replay: --reason is empty; say why the job is replayed")
	}
	a, err := openApp(ctx, pos[0], nil, true)
	if err != nil {
		return err
	}
	defer a.close()
	id := pos[1]
	j, err := a.client.Replay(ctx, id, &errand.ReplayOpts{Operator: operator(), Reason: *reason})
	var se *errandtype.StateError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("cannot replay %s: it is %s, and only a dead (or cancelled) job can be replayed; %s", id, se.State, stateHint(se.State))
	case errors.Is(err, errandtype.ErrNotFound):
		return fmt.Errorf("cannot replay %s: no such job; fieldnotes jobs %s lists them", id, pos[0])
	case err != nil:
		return err
	}
	fmt.Fprintf(stdout, "replayed %s: %s for delivery cycle %d\n", j.ID, j.State, j.Replays+1)
	return nil
}

// stateHint says what to do instead of replaying a job in state s.
func stateHint(s errandtype.JobState) string {
	switch s {
	case errandtype.StateQueued:
		return "it is waiting for a worker: run fieldnotes work"
	case errandtype.StateRetrying:
		return "it will be retried after its backoff: run fieldnotes work"
	case errandtype.StateRunning:
		return "a worker holds it; if that worker died, the next work run takes it over once its lease expires"
	case errandtype.StateSucceeded:
		return "its receipt was delivered"
	}
	return "see fieldnotes jobs"
}

// operator names who replays, for errand's audit: the OS user.
func operator() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}
