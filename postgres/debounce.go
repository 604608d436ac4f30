package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5"
)

// debounceLockClass is the first key of the transaction-level advisory
// locks that make enqueues of one debounce key take turns; the second is
// the hash of the kind and key. Locks of two int4 keys never meet errand's
// other advisory lock, of one bigint.
const debounceLockClass = 0x6b657973

// keyedTx is [errandstore.KeyedTx] on q, a transaction, with r's
// expansions.
type keyedTx struct {
	s *Store
	q querier
	r *strings.Replacer
}

// LockKeys takes the keys' locks in the order given: unnest yields the
// array's elements in order, and InsertKeyed sorts them. A caller's
// transaction at REPEATABLE READ is refused before any lock: its reads
// after the wait for a key would not see the job the key's last holder
// committed meanwhile, and it would enqueue a second one. (SERIALIZABLE
// fails such a transaction with a serialization error instead.)
func (k keyedTx) LockKeys(ctx context.Context, keys []string) error {
	rs, err := k.q.query(ctx, `SELECT CASE WHEN current_setting('transaction_isolation') = 'repeatable read' THEN false
		ELSE (SELECT count(pg_advisory_xact_lock($1, hashtext(key))) FROM unnest($2::text[]) AS key) >= 0 END`, int32(debounceLockClass), keys)
	if err != nil {
		return err
	}
	defer rs.Close()
	if !rs.Next() {
		return errors.Join(errors.New("lock debounce keys: no answer"), rs.Err())
	}
	var locked bool
	if err := rs.Scan(&locked); err != nil {
		return err
	}
	if !locked {
		return &errandtype.InputError{Field: "transaction", Message: "is REPEATABLE READ; a job with a debounce key must be enqueued in a READ COMMITTED (or SERIALIZABLE) transaction, which sees the key's job committed while it waited for the key"}
	}
	return nil
}

// Now is the time {now} stands for: the injected clock's, or the
// database's.
func (k keyedTx) Now(ctx context.Context) (time.Time, error) {
	if now := k.s.nowArg(); now != nil {
		return now.(time.Time), nil
	}
	return k.s.readNow(ctx, k.q, k.r)
}

func (k keyedTx) FindHolder(ctx context.Context, p *errandstore.JobInsertParams, now time.Time) (*errandtype.Job, error) {
	q := `SELECT ` + keyedColumns + ` FROM {jobs} WHERE ` + errandstore.DebounceHolderSQL(p.Debounce.Mode, pgParam) +
		` ORDER BY created_at DESC, seq DESC LIMIT 1`
	args := []any{p.Kind, p.Debounce.Key}
	if p.Debounce.Mode == errandtype.DebounceFirstWins {
		args = append(args, now.Add(-p.Debounce.Window))
	}
	return k.one(ctx, q, args...)
}

func (k keyedTx) Absorb(ctx context.Context, id string, p *errandstore.JobInsertParams, start *time.Time) (*errandtype.Job, error) {
	set, args := ``, []any{id}
	if start != nil {
		set, args = `, args = $2::jsonb, args_version = $3, available_at = $4`, append(args, string(p.Args), p.ArgsVersion, *start)
	}
	return k.one(ctx, `UPDATE {jobs} SET absorbed = absorbed + 1`+set+`
		WHERE id = $1 AND `+errandstore.DebounceStateSQL(p.Debounce.Mode)+` RETURNING `+keyedColumns, args...)
}

func (k keyedTx) Insert(ctx context.Context, params []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
	return k.s.insert(ctx, k.q, k.r, params)
}

// one runs q and reads its one row of keyedColumns, or nil for none.
func (k keyedTx) one(ctx context.Context, q string, args ...any) (*errandtype.Job, error) {
	rs, err := k.q.query(ctx, k.r.Replace(q), args...)
	if err != nil {
		return nil, err
	}
	jobs, err := scanJobs(rs, newKeyedJobRow().scan)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	return jobs[0], nil
}

// insertKeyedOwnTx is JobInsertMany of jobs with debounce keys: in a
// transaction, which holds their keys' locks until it commits.
func (s *Store) insertKeyedOwnTx(ctx context.Context, params []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
	var rs []errandstore.JobInsertResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		rs, err = errandstore.InsertKeyed(ctx, keyedTx{s, pgxQuerier{tx}, s.own}, params)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// pgParam spells the n-th parameter.
func pgParam(n int) string { return "$" + strconv.Itoa(n) }
