package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// keyedTx is [errandstore.KeyedTx] on a transaction of the one writer.
type keyedTx struct {
	s  *Store
	tx *sql.Tx
}

// LockKeys does nothing: the store's transactions take turns on its one
// writer connection.
func (k keyedTx) LockKeys(context.Context, []string) error { return nil }

func (k keyedTx) Now(context.Context) (time.Time, error) { return k.s.clock.Now(), nil }

func (k keyedTx) FindHolder(ctx context.Context, p *errandstore.JobInsertParams, now time.Time) (*errandtype.Job, error) {
	q := `SELECT ` + keyedColumns + ` FROM errand_jobs WHERE ` +
		errandstore.DebounceHolderSQL(p.Debounce.Mode, sqliteParam) + ` ORDER BY created_at DESC, seq DESC LIMIT 1`
	args := []any{p.Kind, p.Debounce.Key}
	if p.Debounce.Mode == errandtype.DebounceFirstWins {
		args = append(args, micros(now.Add(-p.Debounce.Window)))
	}
	return noRow(scanKeyedJob(k.tx.QueryRowContext(ctx, q, args...)))
}

func (k keyedTx) Absorb(ctx context.Context, id string, p *errandstore.JobInsertParams, start *time.Time) (*errandtype.Job, error) {
	set, args := ``, []any{id}
	if start != nil {
		set, args = `, args = ?2, args_version = ?3, available_at = ?4`, append(args, string(p.Args), p.ArgsVersion, micros(*start))
	}
	return noRow(scanKeyedJob(k.tx.QueryRowContext(ctx, `UPDATE errand_jobs SET absorbed = absorbed + 1`+set+`
		WHERE id = ?1 AND `+errandstore.DebounceStateSQL(p.Debounce.Mode)+` RETURNING `+keyedColumns, args...)))
}

func (k keyedTx) Insert(ctx context.Context, params []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
	return k.s.insert(ctx, k.tx, params)
}

// sqliteParam spells the n-th parameter.
func sqliteParam(n int) string { return "?" + strconv.Itoa(n) }

// noRow makes a missing row a nil job.
func noRow(j *errandtype.Job, err error) (*errandtype.Job, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return j, err
}
