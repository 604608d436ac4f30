package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var _ errandstore.InsertClaimer = (*Store)(nil)

// claimInsertedSQL claims, by the claim's rule, the job ($4, its id) that
// the INSERT before it in the same transaction wrote: the xmin test leaves
// alone a job of that id the insert did not write (its duplicate). Its
// parameters are a claim's, the id in place of the queue.
var claimInsertedSQL = replacePick(claimSQL,
	`SELECT seq FROM {jobs} j WHERE id = $4 AND xmin = pg_current_xact_id()::xid AND `+claimable)

// insertRunningSQL inserts one job as insertOneSQL does, already running
// under a claim's lease when the claim's rule takes it at once: one row
// version, where an insert then a claim write two and enter the job in
// the indexes twice. Its parameters are insertOneSQL's, then the lease in
// microseconds ($24), its owner ($25) and the kinds wanted ($26). The rule
// and the values are the claim's own (claimableKeyless, claimSets), read
// off the row j the insert would write. Only for a job without a unique
// key, an ordering key or a debounce key: their conflicts and holds are
// sorted out by the insert and claim that claimInsertedSQL completes.
// Without the ordering rule's subquery the server keeps the statement's
// generic plan; with it, it planned the statement afresh at every run,
// which cost more than the claim it saves.
var insertRunningSQL = func() string {
	claim := map[string]string{}
	for _, c := range claimSets("$24", "$25") {
		claim[c[0]] = c[1]
	}
	var cols [][2]string // each column written, and its value
	for _, v := range insertValues {
		cols = append(cols, [2]string{v[0], "j." + v[0]})
	}
	row := joinColumns(insertValues, "%[2]s AS %[1]s")
	// The columns a claim writes that an insert leaves to their defaults.
	for _, d := range [][2]string{{"attempt", "0"}, {"attempted_at", "NULL::timestamptz"}, {"lease_token", "NULL::text"},
		{"lease_until", "NULL::timestamptz"}, {"lease_owner", "NULL::text"}} {
		cols = append(cols, [2]string{d[0], "j." + d[0]})
		row += ", " + d[1] + " AS " + d[0]
	}
	for i, c := range cols {
		if v, ok := claim[c[0]]; ok {
			cols[i][1] = "CASE WHEN c.ok THEN " + v + " ELSE " + c[1] + " END"
			delete(claim, c[0])
		}
	}
	if len(claim) > 0 {
		panic("postgres: a claim writes a column the insert of a running job leaves out")
	}
	return `INSERT INTO {jobs} (` + joinColumns(cols, "%[1]s") + `)
	SELECT ` + joinColumns(cols, "%[2]s") + `
	FROM (SELECT ` + row + ` FROM ` + insertOneRow + `) j
		CROSS JOIN LATERAL (SELECT ` + claimableKeyless("$26") + ` AS ok) c` + insertTail
}()

// JobInsertClaim implements [errandstore.InsertClaimer]. A job without keys
// is inserted running (insertRunningSQL). Another job's insert and claim
// go in one pipelined batch, which the server runs as one implicit
// transaction. Either way it costs one round trip and one commit, as an
// enqueue alone does. A claim that meets a job of its ordering key started
// meanwhile (see orderingRace) fails the batch, which writes nothing; the
// job is then inserted unclaimed.
func (s *Store) JobInsertClaim(ctx context.Context, p *errandstore.JobInsertClaimParams) (errandstore.JobInsertResult, bool, error) {
	if err := p.Validate(); err != nil {
		return errandstore.JobInsertResult{}, false, err
	}
	params := []*errandstore.JobInsertParams{p.Job}
	cols, err := newInsertColumns(params)
	if err != nil {
		return errandstore.JobInsertResult{}, false, err
	}
	q := pgxQuerier{s.pool}
	now, err := s.insertNow(ctx, q, s.own, &cols, params)
	if err != nil {
		return errandstore.JobInsertResult{}, false, err
	}
	var inserted []*errandtype.Job
	var claimed *errandtype.Job
	if keyless(p.Job) {
		inserted, claimed, err = s.insertRunning(ctx, &cols, p, now)
	} else {
		inserted, claimed, err = s.insertClaimBatch(ctx, &cols, p, now)
	}
	if orderingRace(err) {
		rs, err := s.insertOwnTx(ctx, params)
		if err != nil {
			return errandstore.JobInsertResult{}, false, err
		}
		return rs[0], false, nil
	}
	if err != nil {
		return errandstore.JobInsertResult{}, false, fmt.Errorf("insert job: %w", badValue(err))
	}
	out, dups := matchInserted(params, inserted)
	if len(dups) > 0 {
		again, err := findDuplicates(ctx, q, s.own, params, cols.uwindows, dups, out)
		if err == nil && len(again) > 0 {
			out, err = s.insertAgain(ctx, q, s.own, params, again, out, 1)
		}
		if err != nil {
			return errandstore.JobInsertResult{}, false, err
		}
		return out[0], false, nil
	}
	if claimed == nil {
		return out[0], false, nil
	}
	return errandstore.JobInsertResult{Job: claimed}, true, nil
}

// keyless reports whether p has no unique, ordering or debounce key.
func keyless(p *errandstore.JobInsertParams) bool {
	return p.UniqueKey == "" && p.OrderingKey == "" && p.Debounce == nil
}

// insertRunning inserts cols, one job, running under p's claim when the
// claim's rule takes it, and returns the job written, and claimed if it was.
func (s *Store) insertRunning(ctx context.Context, cols *insertColumns, p *errandstore.JobInsertClaimParams, now any) (inserted []*errandtype.Job, claimed *errandtype.Job, err error) {
	_, args := cols.statement(s.own, now)
	args = append(args, us(p.Claim.Lease), p.Claim.Owner, kindFilter(p.Claim.Kinds))
	rs, err := s.pool.Query(ctx, s.sql(insertRunningSQL), args...)
	if err != nil {
		return nil, nil, err
	}
	if inserted, err = scanClaimedJobs(rs); err != nil || len(inserted) == 0 {
		return inserted, nil, err
	}
	if inserted[0].State == errandtype.StateRunning {
		claimed = inserted[0]
	}
	return inserted, claimed, nil
}

// insertClaimBatch sends the insert of cols and the claim of p's job, and
// returns what each wrote.
func (s *Store) insertClaimBatch(ctx context.Context, cols *insertColumns, p *errandstore.JobInsertClaimParams, now any) (inserted []*errandtype.Job, claimed *errandtype.Job, err error) {
	b := &pgx.Batch{}
	sql, args := cols.statement(s.own, now)
	b.Queue(sql, args...)
	b.Queue(s.sql(claimInsertedSQL), now, us(p.Claim.Lease), p.Claim.Owner, p.Job.ID, kindFilter(p.Claim.Kinds))
	br := s.pool.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	rs, err := br.Query()
	if err != nil {
		return nil, nil, err
	}
	if inserted, err = scanJobs(rs, jobScanner()); err != nil {
		return nil, nil, err
	}
	rs, err = br.Query()
	if err != nil {
		return nil, nil, err
	}
	jobs, err := scanClaimedJobs(rs)
	if err != nil || len(jobs) == 0 {
		return inserted, nil, err
	}
	return inserted, jobs[0], nil
}
