package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var _ errandstore.BreakerStore = (*Store)(nil)

const breakerColumns = `dependency, state, failures, failing_since, opened_at, open_until, probes, probe_until, trips, last_error, updated_at`

func scanBreaker(row scanner) (*errandtype.BreakerRecord, error) {
	var b errandtype.BreakerRecord
	var state string
	var since, opened, until, probeUntil sql.NullInt64
	var updated int64
	if err := row.Scan(&b.Dependency, &state, &b.Failures, &since, &opened, &until, &b.Probes, &probeUntil,
		&b.Trips, &b.LastError, &updated); err != nil {
		return nil, err
	}
	b.State = errandtype.BreakerState(state)
	b.FailingSince, b.OpenedAt, b.OpenUntil, b.ProbeUntil = nullMicros(since), nullMicros(opened), nullMicros(until), nullMicros(probeUntil)
	b.UpdatedAt = fromMicros(updated)
	return &b, nil
}

// optMicros is t in microseconds, or NULL.
func optMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return micros(*t)
}

// BreakerUpdate implements [errandstore.BreakerStore]. The writer transaction
// serialises events: the read, the decision and the write are one
// compare-and-set.
func (s *Store) BreakerUpdate(ctx context.Context, p *errandstore.BreakerUpdateParams) (*errandstore.BreakerUpdateResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	res := &errandstore.BreakerUpdateResult{}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now().UTC().Truncate(time.Microsecond)
		cur, err := scanBreaker(tx.QueryRowContext(ctx, `SELECT `+breakerColumns+` FROM errand_breakers WHERE dependency = ?`, p.Dependency))
		if errors.Is(err, sql.ErrNoRows) {
			cur, err = nil, nil
		}
		if err != nil {
			return err
		}
		if cur == nil && p.Event == errandstore.BreakerReset {
			return errandtype.ErrNotFound
		}
		tr := errandstore.ApplyBreakerEvent(cur, p, now)
		res.Breaker, res.Applied = tr.Next, tr.Applied
		if !tr.Changed {
			return nil
		}
		b := tr.Next
		if _, err := tx.ExecContext(ctx, `INSERT INTO errand_breakers (`+breakerColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (dependency) DO UPDATE SET state = excluded.state, failures = excluded.failures,
				failing_since = excluded.failing_since, opened_at = excluded.opened_at,
				open_until = excluded.open_until, probes = excluded.probes, probe_until = excluded.probe_until,
				trips = excluded.trips, last_error = excluded.last_error, updated_at = excluded.updated_at`,
			b.Dependency, string(b.State), b.Failures, optMicros(b.FailingSince), optMicros(b.OpenedAt),
			optMicros(b.OpenUntil), b.Probes, optMicros(b.ProbeUntil), b.Trips, b.LastError, micros(b.UpdatedAt)); err != nil {
			return err
		}
		if p.Event != errandstore.BreakerReset {
			return nil
		}
		details, err := json.Marshal(errandstore.BreakerResetDetails{Dependency: p.Dependency, PriorState: cur.State, Failures: cur.Failures})
		if err != nil {
			return err
		}
		return insertAudit(ctx, tx, &auditEntry{action: errandtype.AuditBreakerReset, operator: p.Operator, reason: p.Reason,
			at: now, details: details})
	})
	if err != nil {
		return nil, fmt.Errorf("update breaker %s: %w", p.Dependency, err)
	}
	return res, nil
}

// BreakerList implements [errandstore.BreakerStore].
func (s *Store) BreakerList(ctx context.Context, p *errandstore.BreakerListParams) (*errandstore.BreakerListResult, error) {
	q := `SELECT ` + breakerColumns + ` FROM errand_breakers`
	var args []any
	if len(p.Dependencies) > 0 {
		q += ` WHERE dependency IN (` + placeholders(len(p.Dependencies)) + `)`
		for _, d := range p.Dependencies {
			args = append(args, d)
		}
	}
	res := &errandstore.BreakerListResult{Now: s.clock.Now().UTC().Truncate(time.Microsecond), Breakers: []*errandtype.BreakerRecord{}}
	rows, err := s.read.QueryContext(ctx, q+` ORDER BY dependency`, args...)
	if err != nil {
		return nil, fmt.Errorf("list breakers: %w", err)
	}
	bs, err := scanRows(rows, scanBreaker)
	if err != nil {
		return nil, fmt.Errorf("list breakers: %w", err)
	}
	res.Breakers = append(res.Breakers, bs...)
	return res, nil
}

// BreakerKindsDeclare implements [errandstore.BreakerStore].
func (s *Store) BreakerKindsDeclare(ctx context.Context, p *errandstore.BreakerKindsDeclareParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := micros(s.clock.Now())
		for _, k := range p.Kinds {
			var err error
			if k.Dependency == "" {
				_, err = tx.ExecContext(ctx, `DELETE FROM errand_kind_dependencies WHERE kind = ?`, k.Kind)
			} else {
				_, err = tx.ExecContext(ctx, `INSERT INTO errand_kind_dependencies (kind, dependency, declared_at) VALUES (?, ?, ?)
					ON CONFLICT (kind) DO UPDATE SET dependency = excluded.dependency, declared_at = excluded.declared_at`,
					k.Kind, k.Dependency, now)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("declare kinds' dependencies: %w", err)
	}
	return nil
}

// BreakerKindsList implements [errandstore.BreakerStore].
func (s *Store) BreakerKindsList(ctx context.Context) ([]errandstore.KindDependency, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT kind, dependency, declared_at FROM errand_kind_dependencies ORDER BY kind`)
	if err != nil {
		return nil, fmt.Errorf("list kinds' dependencies: %w", err)
	}
	defer rows.Close()
	out := []errandstore.KindDependency{}
	for rows.Next() {
		var k errandstore.KindDependency
		var at int64
		if err := rows.Scan(&k.Kind, &k.Dependency, &at); err != nil {
			return nil, fmt.Errorf("list kinds' dependencies: %w", err)
		}
		k.DeclaredAt = fromMicros(at)
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list kinds' dependencies: %w", err)
	}
	return out, nil
}
