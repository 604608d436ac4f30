package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var _ errandstore.LimiterStore = (*Store)(nil)

const limiterColumns = `name, mode, rate, burst, min_tokens, ratio, window_us, tokens, denied, updated_at,
	floor_rate, ceiling_rate, held_until, moved_at, moved_reason, decreases, peak, cuts, counts, target_us`

func scanLimiter(row scanner) (*errandtype.LimiterRecord, errandtype.LimiterState, error) {
	var r errandtype.LimiterRecord
	var mode string
	var window, target, updated int64
	var held, moved sql.NullInt64
	var a errandtype.AdaptiveState
	var counts string
	var st errandtype.LimiterState
	if err := row.Scan(&r.Name, &mode, &r.Spec.Rate, &r.Spec.Burst, &r.Spec.Min, &r.Spec.Ratio, &window,
		&st.Tokens, &r.Denied, &updated, &r.Spec.Floor, &r.Spec.Ceiling, &held, &moved, &a.Reason, &a.Decreases, &a.Peak, &a.Cuts, &counts, &target); err != nil {
		return nil, st, err
	}
	r.Spec.Mode, r.Spec.Window = errandtype.LimiterMode(mode), time.Duration(window)*time.Microsecond
	errandstore.ReadLimiterRule(&r, counts, target)
	st.At, st.Rate = fromMicros(updated), r.Spec.Rate
	if t := nullMicros(held); t != nil {
		st.HeldUntil, a.HeldUntil = *t, *t
	}
	if t := nullMicros(moved); t != nil {
		a.MovedAt = *t
	}
	if r.Spec.Adaptive() {
		r.Adaptive = &a
	}
	r.UpdatedAt = st.At
	return &r, st, nil
}

// zeroNull is t in microseconds, or NULL for the zero time.
func zeroNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return micros(t)
}

// LimiterTake implements [errandstore.LimiterStore]. The writer transaction
// serialises takes, in this process and every other on the file.
func (s *Store) LimiterTake(ctx context.Context, p *errandstore.LimiterTakeParams) ([]errandstore.LimiterGrant, error) {
	return errandstore.TakeLimiters(p, func(fn func(*sql.Tx) error) error { return s.tx(ctx, fn) },
		func(tx *sql.Tx, t errandstore.LimiterTake) (errandstore.LimiterGrant, error) {
			now := fromMicros(micros(s.clock.Now()))
			st, err := upsertLimiter(ctx, tx, t.Name, t.Spec, "", now)
			if err != nil {
				return errandstore.LimiterGrant{}, err
			}
			next, cur, grant, denied := t.From(st, now)
			return grant, writeTaken(ctx, tx, t.Name, next, cur, denied)
		})
}

// upsertLimiter creates bucket name with rule sp counting counts (a
// concurrency limit's, see [errandstore.CountsColumn]), or gives it sp's
// rule and counts (an adaptive limit keeps its rate), and returns its
// state.
func upsertLimiter(ctx context.Context, tx *sql.Tx, name string, sp errandtype.LimiterSpec, counts string, now time.Time) (errandtype.LimiterState, error) {
	var st errandtype.LimiterState
	var at int64
	var held sql.NullInt64
	err := tx.QueryRowContext(ctx, `INSERT INTO errand_limiters AS l (`+limiterColumns+`)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 0, ?9, ?10, ?11, NULL, NULL, '', 0, 0, 0, ?12, ?13)
		ON CONFLICT (name) DO UPDATE SET mode = excluded.mode, min_tokens = excluded.min_tokens,
			ratio = excluded.ratio, window_us = excluded.window_us,
			floor_rate = excluded.floor_rate, ceiling_rate = excluded.ceiling_rate, counts = excluded.counts,
			target_us = excluded.target_us
		RETURNING tokens, updated_at, rate, held_until`,
		name, string(sp.Mode), sp.Rate, sp.Burst, sp.Min, sp.Ratio, sp.Window.Microseconds(), sp.Full(), micros(now),
		sp.Floor, sp.Ceiling, counts, sp.Target.Microseconds(),
	).Scan(&st.Tokens, &at, &st.Rate, &held)
	if err != nil {
		return st, err
	}
	st.At = fromMicros(at)
	if t := nullMicros(held); t != nil {
		st.HeldUntil = *t
	}
	return st, nil
}

// writeTaken writes bucket name's state after a take or a limited claim.
func writeTaken(ctx context.Context, tx *sql.Tx, name string, next errandtype.LimiterState, cur errandtype.LimiterSpec, denied int) error {
	_, err := tx.ExecContext(ctx, `UPDATE errand_limiters SET tokens = ?, updated_at = ?, denied = denied + ?,
		rate = ?, burst = ?, held_until = ? WHERE name = ?`,
		next.Tokens, micros(next.At), denied, cur.Rate, cur.Burst, zeroNull(next.HeldUntil), name)
	return err
}

// LimiterGive implements [errandstore.LimiterStore].
func (s *Store) LimiterGive(ctx context.Context, p *errandstore.LimiterGiveParams) error {
	return errandstore.GiveLimiters(p, func(fn func(*sql.Tx) error) error { return s.tx(ctx, fn) },
		func(tx *sql.Tx, g errandstore.LimiterGive) error {
			r, st, err := scanLimiter(tx.QueryRowContext(ctx, `SELECT `+limiterColumns+` FROM errand_limiters WHERE name = ?`, g.Name))
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			next := r.Spec.Give(st, fromMicros(micros(s.clock.Now())), g.Amount)
			_, err = tx.ExecContext(ctx, `UPDATE errand_limiters SET tokens = ?, updated_at = ? WHERE name = ?`,
				next.Tokens, micros(next.At), g.Name)
			return err
		})
}

// LimiterAdjust implements [errandstore.LimiterStore].
func (s *Store) LimiterAdjust(ctx context.Context, p *errandstore.LimiterAdjustParams) (*errandstore.LimiterAdjustResult, error) {
	return errandstore.AdjustLimiter(p, func() time.Time { return fromMicros(micros(s.clock.Now())) },
		func(fn func(*sql.Tx) error) error { return s.tx(ctx, fn) },
		func(tx *sql.Tx) (*errandtype.LimiterRecord, errandtype.LimiterState, error) {
			r, st, err := scanLimiter(tx.QueryRowContext(ctx, `SELECT `+limiterColumns+` FROM errand_limiters WHERE name = ?`, p.Name))
			if errors.Is(err, sql.ErrNoRows) {
				return nil, st, nil
			}
			return r, st, err
		},
		func(tx *sql.Tx, r *errandtype.LimiterRecord, st errandtype.LimiterState) error {
			a := r.Adaptive
			_, err := tx.ExecContext(ctx, `UPDATE errand_limiters SET rate = ?, burst = ?, tokens = ?, updated_at = ?,
				held_until = ?, moved_at = ?, moved_reason = ?, decreases = ?, peak = ?, cuts = ? WHERE name = ?`,
				r.Spec.Rate, r.Spec.Burst, st.Tokens, micros(st.At), zeroNull(a.HeldUntil), zeroNull(a.MovedAt), a.Reason, a.Decreases, a.Peak, a.Cuts, r.Name)
			return err
		})
}

// LimiterList implements [errandstore.LimiterStore].
func (s *Store) LimiterList(ctx context.Context, _ *errandstore.LimiterListParams) ([]*errandtype.LimiterRecord, error) {
	now := fromMicros(micros(s.clock.Now()))
	rows, err := s.read.QueryContext(ctx, `SELECT `+limiterColumns+` FROM errand_limiters ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list limiters: %w", err)
	}
	defer rows.Close()
	out := []*errandtype.LimiterRecord{}
	var states []errandtype.LimiterState
	for rows.Next() {
		r, st, err := scanLimiter(rows)
		if err != nil {
			return nil, fmt.Errorf("list limiters: %w", err)
		}
		r.Tokens = r.Spec.Level(st, now)
		out = append(out, r)
		states = append(states, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list limiters: %w", err)
	}
	rows.Close()
	if err := s.fillRunning(ctx, out, states, now); err != nil {
		return nil, fmt.Errorf("list limiters: %w", err)
	}
	return out, nil
}
