package postgres_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/errandhq/errand/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// everyCapability is what both stores implement and the cases call.
type everyCapability interface {
	errandstore.Store
	errandstore.ScheduleStore
	errandstore.BatchStore
	errandstore.DeadHookStore
	errandstore.DeadHookCursorStore
	errandstore.FairClaimer
	errandstore.BreakerStore
	errandstore.LimiterStore
	errandstore.WorkflowStore
	errandstore.Notifier
}

// aenv is one of the two stores the cases run on; pg or sq is set.
type aenv struct {
	t     *testing.T
	ctx   context.Context
	s     everyCapability
	pg    *postgres.Store
	sq    *sqlite.Store
	sqlv  *postgres.SQLStore
	clock *errandtest.Clock
	name  string
}

func ajob(id, queue string) *errandstore.JobInsertParams {
	return &errandstore.JobInsertParams{ID: id, Queue: queue, Kind: "k", Args: json.RawMessage(`{"n":1}`), ArgsVersion: 1, MaxAttempts: 3}
}

func tmpl(kind, queue string) *errandstore.JobTemplate {
	return &errandstore.JobTemplate{Kind: kind, Queue: queue, Args: json.RawMessage(`{"n":1}`), ArgsVersion: 1, MaxAttempts: 3}
}

type setupErr struct{ error }

func must(err error) {
	if err != nil {
		panic(setupErr{err})
	}
}

func (e *aenv) insert(ps ...*errandstore.JobInsertParams) {
	_, err := e.s.JobInsertMany(e.ctx, &errandstore.JobInsertManyParams{Jobs: ps})
	must(err)
}

func (e *aenv) claim(queue string) *errandtype.Job {
	js, err := e.s.JobClaimMany(e.ctx, &errandstore.JobClaimParams{Queues: []string{queue}, Limit: 1, Lease: time.Minute, Owner: "o"})
	must(err)
	if len(js) != 1 {
		must(fmt.Errorf("claimed %d in %s", len(js), queue))
	}
	return js[0]
}

// running inserts a job in its own queue u and claims it.
func (e *aenv) running(u string) *errandtype.Job {
	e.insert(ajob(u, "q-"+u))
	return e.claim("q-" + u)
}

func lease(j *errandtype.Job) errandstore.JobLease {
	return errandstore.JobLease{ID: j.ID, LeaseToken: *j.LeaseToken}
}

func (e *aenv) deadJob(u string) *errandtype.Job {
	j := e.running(u)
	rs, err := e.s.JobRecordOutcomes(e.ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{{JobLease: lease(j), Kind: errandstore.OutcomeDead,
		Error: &errandtype.AttemptError{Attempt: 1, Class: errand.ClassPermanent, Message: "x"}}}})
	must(err)
	must(rs[0].Err)
	return j
}

type acase struct {
	method, field string
	run           func(e *aenv, u, bad string) (string, error)
}

// setField sets the one of id, operator and reason that f names to bad.
func setField(f, bad string, id, operator, reason *string) {
	*map[string]*string{"ID": id, "Operator": operator, "Reason": reason}[f] = bad
}

func n[T any](xs []T) string { return fmt.Sprintf("len=%d", len(xs)) }

var nonstorable = []string{"a\x00b", "a\xffb"}

func classify(res string, err error) (class, text string) {
	var ie *errandtype.InputError
	var se *errandtype.StateError
	var pe *pgconn.PgError
	var sp setupErr
	switch {
	case err == nil:
		return "nil", res
	case errors.As(err, &sp):
		return "SETUP", sp.Error()
	case errors.As(err, &pe):
		return "RAW-SQLSTATE-" + pe.Code, err.Error()
	case errors.Is(err, errandtype.ErrNotFound):
		return "ErrNotFound", err.Error()
	case errors.Is(err, errandtype.ErrLeaseLost):
		return "ErrLeaseLost", err.Error()
	case errors.As(err, &ie):
		if strings.Contains(ie.Message, "PostgreSQL refused it") {
			return "InputError(badValue)", err.Error()
		}
		return "InputError", err.Error()
	case errors.As(err, &se):
		return "StateError", err.Error()
	}
	return "other", err.Error()
}

func runCase(e *aenv, c acase, u, bad string) (class, text string) {
	defer func() {
		if r := recover(); r != nil {
			if sp, ok := r.(setupErr); ok {
				class, text = "SETUP", sp.Error()
				return
			}
			class, text = "PANIC", fmt.Sprint(r)
		}
	}()
	res, err := c.run(e, u, bad)
	return classify(res, err)
}

// TestNonStorableTextSameOnBothStores calls every store method that takes
// text with each text field in turn set to a value SQLite keeps and
// PostgreSQL refuses (a NUL byte, invalid UTF-8), on both stores, and
// requires the same answer from both: the same *InputError, ErrNotFound,
// ErrLeaseLost or empty result, and never PostgreSQL's own refusal, which
// a caller would take for an outage (see errandtype.StorableText).
func TestNonStorableTextSameOnBothStores(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	pgClock, sqClock := errandtest.NewClock(start), errandtest.NewClock(start)
	pg, err := postgres.Open(ctx, url, &postgres.Options{Schema: pgtest.Schema(t, url), Clock: pgClock})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	sq, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "a.db"), &sqlite.Options{Clock: sqClock})
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	envs := []*aenv{
		{t: t, ctx: ctx, s: sq, sq: sq, clock: sqClock, name: "sqlite"},
		{t: t, ctx: ctx, s: pg, pg: pg, sqlv: pg.SQL(nil), clock: pgClock, name: "postgres"},
	}
	cases := nonStorableCases()
	if len(cases) < 90 {
		t.Fatalf("%d cases; the list lost some", len(cases))
	}
	if testing.Verbose() {
		t.Logf("%d cases", len(cases))
	}
	for ci, c := range cases {
		for bi, bad := range nonstorable {
			u := fmt.Sprintf("u%d-%d", ci, bi)
			var cls, txt [2]string
			for i, e := range envs {
				cls[i], txt[i] = runCase(e, c, u, bad)
			}
			switch {
			case cls[0] == "SETUP" || cls[1] == "SETUP" || cls[0] == "PANIC" || cls[1] == "PANIC":
				t.Errorf("%s %s %q: the case could not run:\n  sqlite: %s\n  postgres: %s", c.method, c.field, bad, txt[0], txt[1])
			case cls[0] != cls[1] || (cls[0] == "nil" && txt[0] != txt[1]):
				t.Errorf("%s %s %q: sqlite says %s, postgres %s:\n  sqlite: %s\n  postgres: %s", c.method, c.field, bad, cls[0], cls[1], txt[0], txt[1])
			case strings.HasPrefix(cls[1], "RAW") || cls[1] == "InputError(badValue)":
				t.Errorf("%s %s %q: PostgreSQL refused the value itself: %s", c.method, c.field, bad, txt[1])
			}
		}
	}
}

func nonStorableCases() []acase {
	var cs []acase
	add := func(method, field string, run func(e *aenv, u, bad string) (string, error)) {
		cs = append(cs, acase{method, field, run})
	}

	// ---- JobInsertMany / JobInsertManyTx / BatchInsert members / ScheduleAdvance job
	jobFields := map[string]func(p *errandstore.JobInsertParams, bad string){
		"ID":          func(p *errandstore.JobInsertParams, bad string) { p.ID = bad },
		"Queue":       func(p *errandstore.JobInsertParams, bad string) { p.Queue = bad },
		"Kind":        func(p *errandstore.JobInsertParams, bad string) { p.Kind = bad },
		"UniqueKey":   func(p *errandstore.JobInsertParams, bad string) { p.UniqueKey = bad },
		"OrderingKey": func(p *errandstore.JobInsertParams, bad string) { p.OrderingKey = bad },
		"FairnessKey": func(p *errandstore.JobInsertParams, bad string) { p.FairnessKey = bad },
		"Tags[]":      func(p *errandstore.JobInsertParams, bad string) { p.Tags = []string{"ok", bad} },
	}
	var jfNames []string
	for k := range jobFields {
		jfNames = append(jfNames, k)
	}
	sort.Strings(jfNames)
	for _, f := range jfNames {
		set := jobFields[f]
		add("JobInsertMany", "Jobs[]."+f, func(e *aenv, u, bad string) (string, error) {
			p := ajob(u, "q-"+u)
			set(p, bad)
			r, err := e.s.JobInsertMany(e.ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{ajob(u+"-ok", "q-"+u), p}})
			return n(r), err
		})
		add("JobInsertManyTx", "Jobs[]."+f, func(e *aenv, u, bad string) (string, error) {
			p := ajob(u, "q-"+u)
			set(p, bad)
			var r []errandstore.JobInsertResult
			var err error
			if e.pg != nil {
				err = e.pg.InTx(e.ctx, func(ctx context.Context, tx pgx.Tx) error {
					r, err = e.pg.JobInsertManyTx(ctx, tx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{p}})
					return err
				})
			} else {
				err = e.sq.InTx(e.ctx, func(ctx context.Context, tx *sql.Tx) error {
					r, err = e.sq.JobInsertManyTx(ctx, tx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{p}})
					return err
				})
			}
			return n(r), err
		})
		add("SQLStore.JobInsertManyTx", "Jobs[]."+f, func(e *aenv, u, bad string) (string, error) {
			p := ajob(u, "q-"+u)
			set(p, bad)
			var r []errandstore.JobInsertResult
			var err error
			if e.pg != nil {
				err = e.sqlv.InTx(e.ctx, func(ctx context.Context, tx *sql.Tx) error {
					r, err = e.sqlv.JobInsertManyTx(ctx, tx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{p}})
					return err
				})
			} else {
				err = e.sq.InTx(e.ctx, func(ctx context.Context, tx *sql.Tx) error {
					r, err = e.sq.JobInsertManyTx(ctx, tx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{p}})
					return err
				})
			}
			return n(r), err
		})
		add("BatchInsert", "Jobs[]."+f, func(e *aenv, u, bad string) (string, error) {
			p := ajob(u, "q-"+u)
			set(p, bad)
			r, err := e.s.BatchInsert(e.ctx, &errandstore.BatchInsertParams{ID: "b-" + u, Jobs: []*errandstore.JobInsertParams{p}})
			return fmt.Sprint(r != nil), err
		})
		add("ScheduleAdvance", "Job."+f, func(e *aenv, u, bad string) (string, error) {
			now := e.clock.Now()
			next := now.Add(time.Minute)
			_, err := e.s.ScheduleUpsert(e.ctx, &errandstore.ScheduleUpsertParams{Name: "s-" + u, Spec: "@every 1m", Kind: "k", Queue: "cron", Missed: errandtype.MissedSkip, NextFireAt: next})
			must(err)
			j := ajob(u, "cron")
			j.UniqueKey = errand.ScheduleUniqueKey("s-"+u, next)
			set(j, bad)
			r, err := e.s.ScheduleAdvance(e.ctx, &errandstore.ScheduleAdvanceParams{Name: "s-" + u, From: next, To: next.Add(time.Minute), Tick: next, Job: j})
			if r != nil {
				return fmt.Sprintf("advanced=%v", r.Advanced), err
			}
			return "", err
		})
	}

	// ---- reads
	add("JobGet", "ID", func(e *aenv, u, bad string) (string, error) {
		_, err := e.s.JobGet(e.ctx, &errandstore.JobGetParams{ID: bad})
		return "", err
	})
	add("JobList", "Queue", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.JobList(e.ctx, &errandstore.JobListParams{Queue: bad, Limit: 10})
		return n(r), err
	})
	add("JobList", "Kind", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.JobList(e.ctx, &errandstore.JobListParams{Kind: bad, Limit: 10})
		return n(r), err
	})
	add("JobList", "States[]", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.JobList(e.ctx, &errandstore.JobListParams{States: []errandtype.JobState{errandtype.JobState(bad)}, Limit: 10})
		return n(r), err
	})

	// ---- claims
	claimFields := map[string]func(p *errandstore.JobClaimParams, bad string){
		"Queues[]":         func(p *errandstore.JobClaimParams, bad string) { p.Queues = append(p.Queues, bad) },
		"Queues[] only":    func(p *errandstore.JobClaimParams, bad string) { p.Queues = []string{bad} },
		"Kinds[]":          func(p *errandstore.JobClaimParams, bad string) { p.Kinds = []string{"k", bad} },
		"Owner":            func(p *errandstore.JobClaimParams, bad string) { p.Owner = bad },
		"SkipRetryKinds[]": func(p *errandstore.JobClaimParams, bad string) { p.SkipRetryKinds = []string{bad} },
	}
	var cfNames []string
	for k := range claimFields {
		cfNames = append(cfNames, k)
	}
	sort.Strings(cfNames)
	for _, f := range cfNames {
		set := claimFields[f]
		add("JobClaimMany", f, func(e *aenv, u, bad string) (string, error) {
			e.insert(ajob(u, "q-"+u))
			p := &errandstore.JobClaimParams{Queues: []string{"q-" + u}, Limit: 5, Lease: time.Minute, Owner: "o"}
			set(p, bad)
			r, err := e.s.JobClaimMany(e.ctx, p)
			return n(r), err
		})
		add("JobClaimFair", f, func(e *aenv, u, bad string) (string, error) {
			j := ajob(u, "q-"+u)
			j.FairnessKey = "fk"
			e.insert(j)
			p := &errandstore.JobClaimParams{Queues: []string{"q-" + u}, Limit: 5, Lease: time.Minute, Owner: "o"}
			set(p, bad)
			if f == "Queues[]" {
				p.Queues = []string{bad} // fair claims take one queue
			}
			r, err := e.s.JobClaimFair(e.ctx, p)
			return n(r), err
		})
		add("JobClaimManyNextDue(pg)/JobClaimMany+JobNextDue(sqlite)", "claim."+f, func(e *aenv, u, bad string) (string, error) {
			e.insert(ajob(u, "q-"+u))
			p := &errandstore.JobClaimParams{Queues: []string{"q-" + u}, Limit: 5, Lease: time.Minute, Owner: "o"}
			set(p, bad)
			nd := &errandstore.JobNextDueParams{Queues: []string{"q-" + u}}
			if e.pg != nil {
				r, d, err := e.pg.JobClaimManyNextDue(e.ctx, p, nd)
				return n(r) + fmt.Sprintf(" found=%v", d.Found), err
			}
			r, err := e.s.JobClaimMany(e.ctx, p)
			if err != nil {
				return "", err
			}
			d, err := e.s.JobNextDue(e.ctx, nd)
			return n(r) + fmt.Sprintf(" found=%v", d.Found), err
		})
	}
	for _, f := range []string{"Queues[]", "Kinds[]"} {
		add("JobNextDue", f, func(e *aenv, u, bad string) (string, error) {
			p := &errandstore.JobNextDueParams{Queues: []string{"default"}}
			if f == "Queues[]" {
				p.Queues = []string{"default", bad}
			} else {
				p.Kinds = []string{"k", bad}
			}
			r, err := e.s.JobNextDue(e.ctx, p)
			return fmt.Sprintf("found=%v", r.Found), err
		})
		add("JobClaimManyNextDue(pg)/JobNextDue(sqlite)", "next."+f, func(e *aenv, u, bad string) (string, error) {
			e.insert(ajob(u, "q-"+u))
			p := &errandstore.JobClaimParams{Queues: []string{"q-" + u}, Limit: 5, Lease: time.Minute, Owner: "o"}
			nd := &errandstore.JobNextDueParams{Queues: []string{"q-" + u}}
			if f == "Queues[]" {
				nd.Queues = append(nd.Queues, bad)
			} else {
				nd.Kinds = []string{"k", bad}
			}
			if e.pg != nil {
				r, d, err := e.pg.JobClaimManyNextDue(e.ctx, p, nd)
				return n(r) + fmt.Sprintf(" found=%v", d.Found), err
			}
			r, err := e.s.JobClaimMany(e.ctx, p)
			if err != nil {
				return "", err
			}
			d, err := e.s.JobNextDue(e.ctx, nd)
			return n(r) + fmt.Sprintf(" found=%v", d.Found), err
		})
	}

	// ---- fenced writes
	add("JobHeartbeatMany", "Leases[].ID", func(e *aenv, u, bad string) (string, error) {
		j := e.running(u)
		l := lease(j)
		l.ID = bad
		r, err := e.s.JobHeartbeatMany(e.ctx, &errandstore.JobHeartbeatParams{Leases: []errandstore.JobLease{l}, Lease: time.Minute})
		return n(r), err
	})
	add("JobHeartbeatMany", "Leases[].LeaseToken", func(e *aenv, u, bad string) (string, error) {
		j := e.running(u)
		l := lease(j)
		l.LeaseToken = bad
		r, err := e.s.JobHeartbeatMany(e.ctx, &errandstore.JobHeartbeatParams{Leases: []errandstore.JobLease{l}, Lease: time.Minute})
		return n(r), err
	})
	add("JobSetProgress", "ID", func(e *aenv, u, bad string) (string, error) {
		j := e.running(u)
		return "", e.s.JobSetProgress(e.ctx, &errandstore.JobSetProgressParams{ID: bad, LeaseToken: *j.LeaseToken, Progress: json.RawMessage(`{}`)})
	})
	add("JobSetProgress", "LeaseToken", func(e *aenv, u, bad string) (string, error) {
		j := e.running(u)
		return "", e.s.JobSetProgress(e.ctx, &errandstore.JobSetProgressParams{ID: j.ID, LeaseToken: bad, Progress: json.RawMessage(`{}`)})
	})
	outcomeFields := map[string]func(o *errandstore.JobOutcome, bad string){
		"ID":            func(o *errandstore.JobOutcome, bad string) { o.ID = bad },
		"LeaseToken":    func(o *errandstore.JobOutcome, bad string) { o.LeaseToken = bad },
		"Kind":          func(o *errandstore.JobOutcome, bad string) { o.Kind = errandstore.OutcomeKind(bad) },
		"Error.Class":   func(o *errandstore.JobOutcome, bad string) { o.Error.Class = bad },
		"Error.Message": func(o *errandstore.JobOutcome, bad string) { o.Error.Message = bad },
		"Error.Stack":   func(o *errandstore.JobOutcome, bad string) { o.Error.Stack = bad },
	}
	var ofNames []string
	for k := range outcomeFields {
		ofNames = append(ofNames, k)
	}
	sort.Strings(ofNames)
	for _, f := range ofNames {
		set := outcomeFields[f]
		add("JobRecordOutcomes", "Outcomes[]."+f, func(e *aenv, u, bad string) (string, error) {
			j := e.running(u)
			o := &errandstore.JobOutcome{JobLease: lease(j), Kind: errandstore.OutcomeDead, Error: &errandtype.AttemptError{Attempt: 1, Class: errand.ClassPermanent, Message: "m"}}
			set(o, bad)
			r, err := e.s.JobRecordOutcomes(e.ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{o}})
			if err == nil && len(r) == 1 && r[0].Err != nil {
				c, _ := classify("", r[0].Err)
				return "result.Err=" + c, nil
			}
			return n(r), err
		})
	}
	add("JobSetOutput", "ID", func(e *aenv, u, bad string) (string, error) {
		j := e.running(u)
		return "", e.s.JobSetOutput(e.ctx, &errandstore.JobSetOutputParams{ID: bad, LeaseToken: *j.LeaseToken, Output: json.RawMessage(`{}`)})
	})
	add("JobSetOutput", "LeaseToken", func(e *aenv, u, bad string) (string, error) {
		j := e.running(u)
		return "", e.s.JobSetOutput(e.ctx, &errandstore.JobSetOutputParams{ID: j.ID, LeaseToken: bad, Output: json.RawMessage(`{}`)})
	})

	// ---- ops
	for _, f := range []string{"ID", "Operator", "Reason"} {
		add("JobReplay", f, func(e *aenv, u, bad string) (string, error) {
			j := e.deadJob(u)
			p := &errandstore.JobReplayParams{ID: j.ID, Operator: "ana", Reason: "why"}
			setField(f, bad, &p.ID, &p.Operator, &p.Reason)
			r, err := e.s.JobReplay(e.ctx, p)
			if r != nil {
				return string(r.State), err
			}
			return "", err
		})
		add("JobCancel", f, func(e *aenv, u, bad string) (string, error) {
			e.insert(ajob(u, "q-"+u))
			p := &errandstore.JobCancelParams{ID: u, Operator: "ana", Reason: "why"}
			setField(f, bad, &p.ID, &p.Operator, &p.Reason)
			r, err := e.s.JobCancel(e.ctx, p)
			if r != nil {
				return string(r.State), err
			}
			return "", err
		})
		add("JobCancel(running)", f, func(e *aenv, u, bad string) (string, error) {
			e.running(u)
			p := &errandstore.JobCancelParams{ID: u, Operator: "ana", Reason: "why"}
			setField(f, bad, &p.ID, &p.Operator, &p.Reason)
			r, err := e.s.JobCancel(e.ctx, p)
			if r != nil {
				return string(r.State), err
			}
			return "", err
		})
		add("ScheduleDelete", f, func(e *aenv, u, bad string) (string, error) {
			_, err := e.s.ScheduleUpsert(e.ctx, &errandstore.ScheduleUpsertParams{Name: "s-" + u, Spec: "@every 1m", Kind: "k", Queue: "cron", Missed: errandtype.MissedSkip, NextFireAt: e.clock.Now().Add(time.Minute)})
			must(err)
			p := &errandstore.ScheduleDeleteParams{Name: "s-" + u, Operator: "ana", Reason: "why"}
			setField(f, bad, &p.Name, &p.Operator, &p.Reason)
			r, err := e.s.ScheduleDelete(e.ctx, p)
			return fmt.Sprint(r != nil), err
		})
	}
	add("JobReplayAudit", "JobID", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.JobReplayAudit(e.ctx, &errandstore.JobReplayAuditParams{JobID: bad})
		return n(r), err
	})
	add("AuditList", "JobID", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.AuditList(e.ctx, &errandstore.AuditListParams{JobID: bad})
		return n(r), err
	})
	add("AuditList", "Action", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.AuditList(e.ctx, &errandstore.AuditListParams{Action: errandtype.AuditAction(bad)})
		return n(r), err
	})
	for _, f := range []string{"Filter.Kind", "Filter.Queue", "Filter.Class", "Operator", "Reason", "Bulk"} {
		for _, dry := range []bool{false, true} {
			add(fmt.Sprintf("JobReplayMany(dry=%v)", dry), f, func(e *aenv, u, bad string) (string, error) {
				e.deadJob(u)
				p := &errandstore.JobReplayManyParams{Filter: errandstore.DeadFilter{Queue: "q-" + u}, Limit: 10, Operator: "ana", Reason: "why", Bulk: "bulk-" + u, DryRun: dry}
				switch f {
				case "Filter.Kind":
					p.Filter.Kind = bad
				case "Filter.Queue":
					p.Filter.Queue = bad
				case "Filter.Class":
					p.Filter.Class = bad
				case "Operator":
					p.Operator = bad
				case "Reason":
					p.Reason = bad
				case "Bulk":
					p.Bulk = bad
				}
				r, err := e.s.JobReplayMany(e.ctx, p)
				return n(r), err
			})
		}
	}
	for _, f := range []string{"Operator", "Reason"} {
		add("JobPrune", f, func(e *aenv, u, bad string) (string, error) {
			j := e.running(u)
			_, err := e.s.JobRecordOutcomes(e.ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{{JobLease: lease(j), Kind: errandstore.OutcomeSucceeded}}})
			must(err)
			e.clock.Advance(48 * time.Hour)
			p := &errandstore.JobPruneParams{SucceededAge: 24 * time.Hour, Limit: 1000, Operator: "ana", Reason: "why"}
			if f == "Operator" {
				p.Operator = bad
			} else {
				p.Reason = bad
			}
			r, err := e.s.JobPrune(e.ctx, p)
			return fmt.Sprintf("deleted>0=%v", r.Succeeded > 0), err
		})
	}

	// ---- effects
	effFields := []string{"Key", "JobID", "LeaseToken"}
	for _, f := range effFields {
		setE := func(p *errandstore.EffectParams, bad string) {
			switch f {
			case "Key":
				p.Key = bad
			case "JobID":
				p.JobID = bad
			case "LeaseToken":
				p.LeaseToken = bad
			}
		}
		add("EffectBegin", f, func(e *aenv, u, bad string) (string, error) {
			j := e.running(u)
			p := &errandstore.EffectParams{Key: "e-" + u, JobID: j.ID, LeaseToken: *j.LeaseToken}
			setE(p, bad)
			_, err := e.s.EffectBegin(e.ctx, p)
			return "", err
		})
		add("EffectComplete", f, func(e *aenv, u, bad string) (string, error) {
			j := e.running(u)
			p := &errandstore.EffectParams{Key: "e-" + u, JobID: j.ID, LeaseToken: *j.LeaseToken}
			_, err := e.s.EffectBegin(e.ctx, p)
			must(err)
			setE(p, bad)
			_, err = e.s.EffectComplete(e.ctx, p)
			return "", err
		})
		add("EffectRelease", f, func(e *aenv, u, bad string) (string, error) {
			j := e.running(u)
			p := &errandstore.EffectParams{Key: "e-" + u, JobID: j.ID, LeaseToken: *j.LeaseToken}
			_, err := e.s.EffectBegin(e.ctx, p)
			must(err)
			setE(p, bad)
			_, err = e.s.EffectRelease(e.ctx, &errandstore.EffectReleaseParams{EffectParams: *p, Message: "m"})
			return "", err
		})
		add("EffectRecordTx", f, func(e *aenv, u, bad string) (string, error) {
			j := e.running(u)
			p := &errandstore.EffectParams{Key: "e-" + u, JobID: j.ID, LeaseToken: *j.LeaseToken}
			setE(p, bad)
			rp := &errandstore.EffectRecordParams{Key: p.Key, JobID: p.JobID, LeaseToken: p.LeaseToken}
			var ok bool
			var err error
			if e.pg != nil {
				err = e.pg.InTx(e.ctx, func(ctx context.Context, tx pgx.Tx) error {
					ok, err = e.pg.EffectRecordTx(ctx, tx, rp)
					return err
				})
			} else {
				err = e.sq.InTx(e.ctx, func(ctx context.Context, tx *sql.Tx) error {
					ok, err = e.sq.EffectRecordTx(ctx, tx, rp)
					return err
				})
			}
			return fmt.Sprint(ok), err
		})
		add("SQLStore.EffectRecordTx", f, func(e *aenv, u, bad string) (string, error) {
			j := e.running(u)
			p := &errandstore.EffectParams{Key: "e-" + u, JobID: j.ID, LeaseToken: *j.LeaseToken}
			setE(p, bad)
			rp := &errandstore.EffectRecordParams{Key: p.Key, JobID: p.JobID, LeaseToken: p.LeaseToken}
			var ok bool
			var err error
			if e.pg != nil {
				err = e.sqlv.InTx(e.ctx, func(ctx context.Context, tx *sql.Tx) error {
					ok, err = e.sqlv.EffectRecordTx(ctx, tx, rp)
					return err
				})
			} else {
				err = e.sq.InTx(e.ctx, func(ctx context.Context, tx *sql.Tx) error {
					ok, err = e.sq.EffectRecordTx(ctx, tx, rp)
					return err
				})
			}
			return fmt.Sprint(ok), err
		})
	}
	add("EffectRelease", "Message", func(e *aenv, u, bad string) (string, error) {
		j := e.running(u)
		p := &errandstore.EffectParams{Key: "e-" + u, JobID: j.ID, LeaseToken: *j.LeaseToken}
		_, err := e.s.EffectBegin(e.ctx, p)
		must(err)
		_, err = e.s.EffectRelease(e.ctx, &errandstore.EffectReleaseParams{EffectParams: *p, Message: bad})
		return "", err
	})
	add("EffectGet", "Key", func(e *aenv, u, bad string) (string, error) {
		_, err := e.s.EffectGet(e.ctx, &errandstore.EffectGetParams{Key: bad})
		return "", err
	})

	// ---- workers
	for _, f := range []string{"ID", "Host", "Queues[].Name", "Kinds[]"} {
		add("WorkerRegister", f, func(e *aenv, u, bad string) (string, error) {
			p := &errandstore.WorkerRegisterParams{ID: "w-" + u, Host: "h", PID: 1, Queues: []errandtype.WorkerQueue{{Name: "default", Concurrency: 1}}, Kinds: []string{"k"}, HeartbeatInterval: time.Second}
			switch f {
			case "ID":
				p.ID = bad
			case "Host":
				p.Host = bad
			case "Queues[].Name":
				p.Queues[0].Name = bad
			case "Kinds[]":
				p.Kinds = []string{bad}
			}
			_, err := e.s.WorkerRegister(e.ctx, p)
			return "", err
		})
	}
	add("WorkerHeartbeat", "ID", func(e *aenv, u, bad string) (string, error) {
		_, err := e.s.WorkerHeartbeat(e.ctx, &errandstore.WorkerHeartbeatParams{ID: bad})
		return "", err
	})
	add("WorkerStop", "ID", func(e *aenv, u, bad string) (string, error) {
		return "", e.s.WorkerStop(e.ctx, &errandstore.WorkerStopParams{ID: bad})
	})

	// ---- leaders
	add("LeaderElect", "Name", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.LeaderElect(e.ctx, &errandstore.LeaderElectParams{Name: bad, Holder: "h", TTL: time.Minute})
		if r != nil {
			return fmt.Sprintf("leader=%v", r.Leading), err
		}
		return "", err
	})
	add("LeaderElect", "Holder", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.LeaderElect(e.ctx, &errandstore.LeaderElectParams{Name: "L-" + u, Holder: bad, TTL: time.Minute})
		if r != nil {
			return fmt.Sprintf("leader=%v", r.Leading), err
		}
		return "", err
	})
	add("LeaderResign", "Name", func(e *aenv, u, bad string) (string, error) {
		return "", e.s.LeaderResign(e.ctx, &errandstore.LeaderResignParams{Name: bad, Holder: "h"})
	})
	add("LeaderResign", "Holder", func(e *aenv, u, bad string) (string, error) {
		_, err := e.s.LeaderElect(e.ctx, &errandstore.LeaderElectParams{Name: "L-" + u, Holder: "h", TTL: time.Minute})
		must(err)
		return "", e.s.LeaderResign(e.ctx, &errandstore.LeaderResignParams{Name: "L-" + u, Holder: bad})
	})
	add("LeaderGet", "Name", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.LeaderGet(e.ctx, &errandstore.LeaderGetParams{Name: bad})
		return fmt.Sprint(r != nil), err
	})

	// ---- notifier
	add("NotifyQueues", "queues[]", func(e *aenv, u, bad string) (string, error) {
		return "", e.s.NotifyQueues(e.ctx, []string{bad})
	})

	// ---- schedules
	for _, f := range []string{"Name", "Spec", "Kind", "Queue", "Missed"} {
		add("ScheduleUpsert", f, func(e *aenv, u, bad string) (string, error) {
			p := &errandstore.ScheduleUpsertParams{Name: "s-" + u, Spec: "@every 1m", Kind: "k", Queue: "cron", Missed: errandtype.MissedSkip, NextFireAt: e.clock.Now().Add(time.Minute)}
			switch f {
			case "Name":
				p.Name = bad
			case "Spec":
				p.Spec = bad
			case "Kind":
				p.Kind = bad
			case "Queue":
				p.Queue = bad
			case "Missed":
				p.Missed = errandtype.MissedPolicy(bad)
			}
			_, err := e.s.ScheduleUpsert(e.ctx, p)
			return "", err
		})
	}
	add("ScheduleAdvance", "Name", func(e *aenv, u, bad string) (string, error) {
		now := e.clock.Now()
		r, err := e.s.ScheduleAdvance(e.ctx, &errandstore.ScheduleAdvanceParams{Name: bad, From: now, To: now.Add(time.Minute)})
		return fmt.Sprint(r != nil), err
	})

	// ---- batches
	add("BatchInsert", "ID", func(e *aenv, u, bad string) (string, error) {
		_, err := e.s.BatchInsert(e.ctx, &errandstore.BatchInsertParams{ID: bad, Jobs: []*errandstore.JobInsertParams{ajob(u, "q-"+u)}})
		return "", err
	})
	for _, f := range []string{"Kind", "Queue", "OrderingKey", "FairnessKey", "Tags[]"} {
		add("BatchInsert", "Callback."+f, func(e *aenv, u, bad string) (string, error) {
			cb := &errandstore.BatchCallback{Kind: "done", Queue: "cb", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 3}
			switch f {
			case "Kind":
				cb.Kind = bad
			case "Queue":
				cb.Queue = bad
			case "OrderingKey":
				cb.OrderingKey = bad
			case "FairnessKey":
				cb.FairnessKey = bad
			case "Tags[]":
				cb.Tags = []string{bad}
			}
			_, err := e.s.BatchInsert(e.ctx, &errandstore.BatchInsertParams{ID: "b-" + u, Jobs: []*errandstore.JobInsertParams{ajob(u, "q-"+u)}, Callback: cb})
			return "", err
		})
	}
	add("BatchInsertTx", "ID", func(e *aenv, u, bad string) (string, error) {
		p := &errandstore.BatchInsertParams{ID: bad, Jobs: []*errandstore.JobInsertParams{ajob(u, "q-"+u)}}
		var err error
		if e.pg != nil {
			err = e.pg.InTx(e.ctx, func(ctx context.Context, tx pgx.Tx) error { _, err := e.pg.BatchInsertTx(ctx, tx, p); return err })
		} else {
			err = e.sq.InTx(e.ctx, func(ctx context.Context, tx *sql.Tx) error { _, err := e.sq.BatchInsertTx(ctx, tx, p); return err })
		}
		return "", err
	})
	add("SQLStore.BatchInsertTx", "ID", func(e *aenv, u, bad string) (string, error) {
		p := &errandstore.BatchInsertParams{ID: bad, Jobs: []*errandstore.JobInsertParams{ajob(u, "q-"+u)}}
		var err error
		if e.pg != nil {
			err = e.sqlv.InTx(e.ctx, func(ctx context.Context, tx *sql.Tx) error { _, err := e.sqlv.BatchInsertTx(ctx, tx, p); return err })
		} else {
			err = e.sq.InTx(e.ctx, func(ctx context.Context, tx *sql.Tx) error { _, err := e.sq.BatchInsertTx(ctx, tx, p); return err })
		}
		return "", err
	})
	add("BatchGet", "ID", func(e *aenv, u, bad string) (string, error) {
		_, err := e.s.BatchGet(e.ctx, &errandstore.BatchGetParams{ID: bad})
		return "", err
	})
	add("BatchComplete", "IDs[]", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.BatchComplete(e.ctx, &errandstore.BatchCompleteParams{IDs: []string{bad}, Limit: 10})
		return n(r), err
	})
	add("BatchList", "State", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.BatchList(e.ctx, &errandstore.BatchListParams{State: errandtype.BatchState(bad), Limit: 10})
		return n(r), err
	})
	add("BatchList", "Before.ID", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.BatchList(e.ctx, &errandstore.BatchListParams{Limit: 10, Before: &errandtype.ListCursor{ID: bad, CreatedAt: e.clock.Now()}})
		return n(r), err
	})

	// ---- dead hooks
	add("JobListDeadUnhooked", "Kinds[]", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.JobListDeadUnhooked(e.ctx, &errandstore.JobListDeadUnhookedParams{Kinds: []string{"k", bad}, Limit: 10})
		return n(r), err
	})
	add("DeadHookCursors", "Kinds[]", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.DeadHookCursors(e.ctx, &errandstore.DeadHookCursorsParams{Kinds: []string{"k", bad}})
		return fmt.Sprintf("len=%d", len(r)), err
	})
	add("DeadHookCursorAdvance", "Kinds[]", func(e *aenv, u, bad string) (string, error) {
		return "", e.s.DeadHookCursorAdvance(e.ctx, &errandstore.DeadHookCursorAdvanceParams{Kinds: []string{bad}, To: e.clock.Now()})
	})

	// ---- fairness
	add("FairnessKeysWaiting", "Queue", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.FairnessKeysWaiting(e.ctx, &errandstore.FairnessKeysParams{Queue: bad})
		return n(r), err
	})

	// ---- breakers
	for _, f := range []string{"Dependency", "Event", "Message"} {
		add("BreakerUpdate(failure)", f, func(e *aenv, u, bad string) (string, error) {
			p := &errandstore.BreakerUpdateParams{Dependency: "d-" + u, Event: errandstore.BreakerFailure, Message: "m"}
			switch f {
			case "Dependency":
				p.Dependency = bad
			case "Event":
				p.Event = errandstore.BreakerEvent(bad)
			case "Message":
				p.Message = bad
			}
			_, err := e.s.BreakerUpdate(e.ctx, p)
			return "", err
		})
	}
	for _, f := range []string{"Dependency", "Operator", "Reason"} {
		add("BreakerUpdate(reset)", f, func(e *aenv, u, bad string) (string, error) {
			_, err := e.s.BreakerUpdate(e.ctx, &errandstore.BreakerUpdateParams{Dependency: "d-" + u, Event: errandstore.BreakerFailure, Message: "m"})
			must(err)
			p := &errandstore.BreakerUpdateParams{Dependency: "d-" + u, Event: errandstore.BreakerReset, Operator: "ana", Reason: "why"}
			switch f {
			case "Dependency":
				p.Dependency = bad
			case "Operator":
				p.Operator = bad
			case "Reason":
				p.Reason = bad
			}
			_, err = e.s.BreakerUpdate(e.ctx, p)
			return "", err
		})
	}
	for _, ev := range []errandstore.BreakerEvent{errandstore.BreakerSuccess, errandstore.BreakerProbe, errandstore.BreakerRelease} {
		add("BreakerUpdate("+string(ev)+")", "Dependency", func(e *aenv, u, bad string) (string, error) {
			r, err := e.s.BreakerUpdate(e.ctx, &errandstore.BreakerUpdateParams{Dependency: bad, Event: ev})
			if r != nil {
				return fmt.Sprintf("applied=%v", r.Applied), err
			}
			return "", err
		})
	}
	add("BreakerList", "Dependencies[]", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.BreakerList(e.ctx, &errandstore.BreakerListParams{Dependencies: []string{bad}})
		if r != nil {
			return fmt.Sprintf("%+v", *r), err
		}
		return "", err
	})

	// ---- limiters
	add("LimiterTake", "Takes[].Name", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.LimiterTake(e.ctx, &errandstore.LimiterTakeParams{Takes: []errandstore.LimiterTake{{Name: bad, Spec: errandtype.LimiterSpec{Mode: errandtype.LimiterModeRate, Rate: 1, Burst: 1}, Want: 1}}})
		return n(r), err
	})
	add("LimiterTake", "Takes[].Spec.Mode", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.LimiterTake(e.ctx, &errandstore.LimiterTakeParams{Takes: []errandstore.LimiterTake{{Name: "l-" + u, Spec: errandtype.LimiterSpec{Mode: errandtype.LimiterMode(bad), Rate: 1, Burst: 1}, Want: 1}}})
		return n(r), err
	})
	add("LimiterGive", "Gives[].Name", func(e *aenv, u, bad string) (string, error) {
		return "", e.s.LimiterGive(e.ctx, &errandstore.LimiterGiveParams{Gives: []errandstore.LimiterGive{{Name: bad, Amount: 1}}})
	})

	// ---- workflows
	wfFields := []string{"ID", "Name", "Steps[].Name", "Steps[].DependsOn[]",
		"Job.Kind", "Job.Queue", "Job.OrderingKey", "Job.FairnessKey", "Job.Tags[]",
		"Compensation.Kind", "Compensation.Queue", "Compensation.OrderingKey", "Compensation.FairnessKey", "Compensation.Tags[]"}
	for _, f := range wfFields {
		mk := func(u, bad string) *errandstore.WorkflowInsertParams {
			a := errandstore.WorkflowStepDef{Name: "a", Job: tmpl("ka", "qa"), Compensation: tmpl("ua", "qu")}
			b := errandstore.WorkflowStepDef{Name: "b", DependsOn: []string{"a"}, Job: tmpl("kb", "qb")}
			p := &errandstore.WorkflowInsertParams{ID: "wf-" + u, Name: "order", Steps: []errandstore.WorkflowStepDef{a, b}}
			st := &p.Steps[0]
			switch f {
			case "ID":
				p.ID = bad
			case "Name":
				p.Name = bad
			case "Steps[].Name":
				st.Name = bad
				p.Steps[1].DependsOn = []string{bad}
			case "Steps[].DependsOn[]":
				p.Steps[1].DependsOn = []string{bad}
			case "Job.Kind":
				st.Job.Kind = bad
			case "Job.Queue":
				st.Job.Queue = bad
			case "Job.OrderingKey":
				st.Job.OrderingKey = bad
			case "Job.FairnessKey":
				st.Job.FairnessKey = bad
			case "Job.Tags[]":
				st.Job.Tags = []string{bad}
			case "Compensation.Kind":
				st.Compensation.Kind = bad
			case "Compensation.Queue":
				st.Compensation.Queue = bad
			case "Compensation.OrderingKey":
				st.Compensation.OrderingKey = bad
			case "Compensation.FairnessKey":
				st.Compensation.FairnessKey = bad
			case "Compensation.Tags[]":
				st.Compensation.Tags = []string{bad}
			}
			return p
		}
		add("WorkflowInsert", f, func(e *aenv, u, bad string) (string, error) {
			_, err := e.s.WorkflowInsert(e.ctx, mk(u, bad))
			return "", err
		})
		add("WorkflowInsertTx", f, func(e *aenv, u, bad string) (string, error) {
			p := mk(u, bad)
			var err error
			if e.pg != nil {
				err = e.pg.InTx(e.ctx, func(ctx context.Context, tx pgx.Tx) error { _, err := e.pg.WorkflowInsertTx(ctx, tx, p); return err })
			} else {
				err = e.sq.InTx(e.ctx, func(ctx context.Context, tx *sql.Tx) error { _, err := e.sq.WorkflowInsertTx(ctx, tx, p); return err })
			}
			return "", err
		})
		if f == "ID" || f == "Steps[].Name" {
			add("SQLStore.WorkflowInsertTx", f, func(e *aenv, u, bad string) (string, error) {
				p := mk(u, bad)
				var err error
				if e.pg != nil {
					err = e.sqlv.InTx(e.ctx, func(ctx context.Context, tx *sql.Tx) error { _, err := e.sqlv.WorkflowInsertTx(ctx, tx, p); return err })
				} else {
					err = e.sq.InTx(e.ctx, func(ctx context.Context, tx *sql.Tx) error { _, err := e.sq.WorkflowInsertTx(ctx, tx, p); return err })
				}
				return "", err
			})
		}
	}
	add("WorkflowGet", "ID", func(e *aenv, u, bad string) (string, error) {
		_, err := e.s.WorkflowGet(e.ctx, &errandstore.WorkflowGetParams{ID: bad})
		return "", err
	})
	add("WorkflowList", "States[]", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.WorkflowList(e.ctx, &errandstore.WorkflowListParams{States: []errandtype.WorkflowState{errandtype.WorkflowState(bad)}, Limit: 10})
		return n(r), err
	})
	add("WorkflowList", "Before.ID", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.WorkflowList(e.ctx, &errandstore.WorkflowListParams{Limit: 10, Before: &errandtype.ListCursor{ID: bad, CreatedAt: e.clock.Now()}})
		return n(r), err
	})
	add("WorkflowAdvance", "IDs[]", func(e *aenv, u, bad string) (string, error) {
		r, err := e.s.WorkflowAdvance(e.ctx, &errandstore.WorkflowAdvanceParams{IDs: []string{bad}, Limit: 10})
		return n(r), err
	})
	return cs
}
