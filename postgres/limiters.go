package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5"
)

var _ errandstore.LimiterStore = (*Store)(nil)

const limiterColumns = `name, mode, rate, burst, min_tokens, ratio, window_us, tokens, denied, updated_at,
	floor_rate, ceiling_rate, held_until, moved_at, moved_reason, decreases, peak, cuts, counts, target_us`

// limSQL expands a limiter statement: {limiters} and what [Store.sql]
// expands.
func (s *Store) limSQL(q string) string {
	return s.sql(strings.ReplaceAll(q, "{limiters}", s.table("errand_limiters")))
}

func scanLimiter(row scanner) (*errandtype.LimiterRecord, errandtype.LimiterState, error) {
	var r errandtype.LimiterRecord
	var mode string
	var window, target int64
	var st errandtype.LimiterState
	var held, moved *time.Time
	var a errandtype.AdaptiveState
	var counts string
	if err := row.Scan(&r.Name, &mode, &r.Spec.Rate, &r.Spec.Burst, &r.Spec.Min, &r.Spec.Ratio, &window,
		&st.Tokens, &r.Denied, &st.At, &r.Spec.Floor, &r.Spec.Ceiling, &held, &moved, &a.Reason, &a.Decreases, &a.Peak, &a.Cuts, &counts, &target); err != nil {
		return nil, st, err
	}
	r.Spec.Mode, r.Spec.Window = errandtype.LimiterMode(mode), time.Duration(window)*time.Microsecond
	errandstore.ReadLimiterRule(&r, counts, target)
	st.At, st.Rate = st.At.UTC(), r.Spec.Rate
	if held != nil {
		st.HeldUntil, a.HeldUntil = held.UTC(), held.UTC()
	}
	if moved != nil {
		a.MovedAt = moved.UTC()
	}
	if r.Spec.Adaptive() {
		r.Adaptive = &a
	}
	r.UpdatedAt = st.At
	return &r, st, nil
}

// zeroNull is t, or NULL for the zero time.
func zeroNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// LimiterTake implements [errandstore.LimiterStore]. The upsert locks each
// bucket's row until the transaction ends, so concurrent takers, in this
// process or others, take from it one after the other, each from what the
// last one left. Rows are locked in name order, so that two takes of
// several buckets cannot deadlock.
func (s *Store) LimiterTake(ctx context.Context, p *errandstore.LimiterTakeParams) ([]errandstore.LimiterGrant, error) {
	return errandstore.TakeLimiters(p, func(fn func(pgx.Tx) error) error { return pgx.BeginFunc(ctx, s.pool, fn) },
		func(tx pgx.Tx, t errandstore.LimiterTake) (errandstore.LimiterGrant, error) {
			st, now, err := s.upsertLimiter(ctx, tx, t.Name, t.Spec, "")
			if err != nil {
				return errandstore.LimiterGrant{}, err
			}
			next, cur, grant, denied := t.From(st, now)
			return grant, s.writeTaken(ctx, tx, t.Name, next, cur, denied)
		})
}

// upsertLimiter creates bucket name with rule sp, or gives it sp's rule
// (an adaptive limit keeps its rate), and returns its state and now. The
// row stays locked until tx ends.
func (s *Store) upsertLimiter(ctx context.Context, tx pgx.Tx, name string, sp errandtype.LimiterSpec, counts string) (errandtype.LimiterState, time.Time, error) {
	var st errandtype.LimiterState
	var now time.Time
	var held *time.Time
	err := tx.QueryRow(ctx, s.limSQL(`INSERT INTO {limiters} AS l (`+limiterColumns+`)
		VALUES ($2, $3, $4, $5, $6, $7, $8, $9, 0, {now}, $10, $11, NULL, NULL, '', 0, 0, 0, $12, $13)
		ON CONFLICT (name) DO UPDATE SET mode = excluded.mode, min_tokens = excluded.min_tokens,
			ratio = excluded.ratio, window_us = excluded.window_us,
			floor_rate = excluded.floor_rate, ceiling_rate = excluded.ceiling_rate, counts = excluded.counts,
			target_us = excluded.target_us
		RETURNING tokens, updated_at, rate, held_until, {now}`),
		s.nowArg(), name, string(sp.Mode), sp.Rate, sp.Burst, sp.Min, sp.Ratio, sp.Window.Microseconds(), sp.Full(),
		sp.Floor, sp.Ceiling, counts, sp.Target.Microseconds(),
	).Scan(&st.Tokens, &st.At, &st.Rate, &held, &now)
	if err != nil {
		return st, now, badValue(err)
	}
	st.At, now = st.At.UTC(), micro(now)
	if held != nil {
		st.HeldUntil = held.UTC()
	}
	return st, now, nil
}

// writeTaken writes bucket name's state after a take or a limited claim.
func (s *Store) writeTaken(ctx context.Context, tx pgx.Tx, name string, next errandtype.LimiterState, cur errandtype.LimiterSpec, denied int) error {
	_, err := tx.Exec(ctx, s.limSQL(`UPDATE {limiters} SET tokens = $1, updated_at = $2, denied = denied + $3,
		rate = $4, burst = $5, held_until = $6 WHERE name = $7`),
		next.Tokens, next.At, denied, cur.Rate, cur.Burst, zeroNull(next.HeldUntil), name)
	return err
}

// LimiterGive implements [errandstore.LimiterStore]. Rows are locked in name
// order, as LimiterTake locks them.
func (s *Store) LimiterGive(ctx context.Context, p *errandstore.LimiterGiveParams) error {
	return errandstore.GiveLimiters(p, func(fn func(pgx.Tx) error) error { return pgx.BeginFunc(ctx, s.pool, fn) },
		func(tx pgx.Tx, g errandstore.LimiterGive) error {
			var now time.Time
			row := tx.QueryRow(ctx, s.limSQL(`SELECT `+limiterColumns+`, {now} FROM {limiters} WHERE name = $2 FOR UPDATE`), s.nowArg(), g.Name)
			r, st, err := scanLimiter(nowScanner{row, &now})
			if isNoRows(err) {
				return nil
			}
			if err != nil {
				return err
			}
			next := r.Spec.Give(st, micro(now), g.Amount)
			_, err = tx.Exec(ctx, s.limSQL(`UPDATE {limiters} SET tokens = $1, updated_at = $2 WHERE name = $3`),
				next.Tokens, next.At, g.Name)
			return err
		})
}

// LimiterAdjust implements [errandstore.LimiterStore]. The row is locked
// as a take locks it.
func (s *Store) LimiterAdjust(ctx context.Context, p *errandstore.LimiterAdjustParams) (*errandstore.LimiterAdjustResult, error) {
	var now time.Time
	return errandstore.AdjustLimiter(p, func() time.Time { return micro(now) },
		func(fn func(pgx.Tx) error) error { return pgx.BeginFunc(ctx, s.pool, fn) },
		func(tx pgx.Tx) (*errandtype.LimiterRecord, errandtype.LimiterState, error) {
			row := tx.QueryRow(ctx, s.limSQL(`SELECT `+limiterColumns+`, {now} FROM {limiters} WHERE name = $2 FOR UPDATE`), s.nowArg(), p.Name)
			r, st, err := scanLimiter(nowScanner{row, &now})
			if isNoRows(err) {
				return nil, st, nil
			}
			return r, st, err
		},
		func(tx pgx.Tx, r *errandtype.LimiterRecord, st errandtype.LimiterState) error {
			a := r.Adaptive
			_, err := tx.Exec(ctx, s.limSQL(`UPDATE {limiters} SET rate = $1, burst = $2, tokens = $3, updated_at = $4,
				held_until = $5, moved_at = $6, moved_reason = $7, decreases = $8, peak = $9, cuts = $10 WHERE name = $11`),
				r.Spec.Rate, r.Spec.Burst, st.Tokens, st.At, zeroNull(a.HeldUntil), zeroNull(a.MovedAt), a.Reason, a.Decreases, a.Peak, a.Cuts, r.Name)
			return err
		})
}

// nowScanner scans a row whose last column is {now} into now, and the
// others as the wrapped scan asks.
type nowScanner struct {
	row pgx.Row
	now *time.Time
}

func (n nowScanner) Scan(dest ...any) error { return n.row.Scan(append(dest, n.now)...) }

// LimiterList implements [errandstore.LimiterStore].
func (s *Store) LimiterList(ctx context.Context, _ *errandstore.LimiterListParams) ([]*errandtype.LimiterRecord, error) {
	rows, err := s.pool.Query(ctx, s.limSQL(`SELECT `+limiterColumns+`, {now} FROM {limiters} ORDER BY name`), s.nowArg())
	if err != nil {
		return nil, fmt.Errorf("list limiters: %w", err)
	}
	defer rows.Close()
	out := []*errandtype.LimiterRecord{}
	var states []errandtype.LimiterState
	var at time.Time
	for rows.Next() {
		var now time.Time
		r, st, err := scanLimiter(nowScanner{rows, &now})
		if err != nil {
			return nil, fmt.Errorf("list limiters: %w", err)
		}
		r.Tokens = r.Spec.Level(st, micro(now))
		out = append(out, r)
		states, at = append(states, st), micro(now)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list limiters: %w", err)
	}
	rows.Close()
	if err := s.fillRunning(ctx, out, states, at); err != nil {
		return nil, fmt.Errorf("list limiters: %w", err)
	}
	return out, nil
}
