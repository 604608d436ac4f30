package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5"
)

var _ errandstore.BreakerStore = (*Store)(nil)

const breakerColumns = `dependency, state, failures, failing_since, opened_at, open_until, probes, probe_until, trips, last_error, updated_at`

// breakerSQL expands a breaker statement: {breakers}, {kind_deps} and what
// [Store.sql] expands.
func (s *Store) breakerSQL(q string) string {
	q = strings.ReplaceAll(q, "{kind_deps}", s.table("errand_kind_dependencies"))
	return s.sql(strings.ReplaceAll(q, "{breakers}", s.table("errand_breakers")))
}

// breakerRow scans a breaker whose columns may all be NULL (the outer side
// of a join): ok is false when they are.
type breakerRow struct {
	dependency, state, lastError                  *string
	failures, probes, trips                       *int
	failingSince, openedAt, openUntil, probeUntil *time.Time
	updatedAt                                     *time.Time
}

func (r *breakerRow) dest() []any {
	return []any{&r.dependency, &r.state, &r.failures, &r.failingSince, &r.openedAt, &r.openUntil, &r.probes,
		&r.probeUntil, &r.trips, &r.lastError, &r.updatedAt}
}

func (r *breakerRow) record() *errandtype.BreakerRecord {
	if r.dependency == nil {
		return nil
	}
	return &errandtype.BreakerRecord{
		Dependency: *r.dependency, State: errandtype.BreakerState(*r.state), Failures: *r.failures,
		FailingSince: utc(r.failingSince), OpenedAt: utc(r.openedAt), OpenUntil: utc(r.openUntil),
		Probes: *r.probes, ProbeUntil: utc(r.probeUntil), Trips: *r.trips, LastError: *r.lastError,
		UpdatedAt: r.updatedAt.UTC(),
	}
}

// BreakerUpdate implements [errandstore.BreakerStore]. The row lock (FOR UPDATE)
// serialises events on one breaker; the first event of a dependency inserts
// its row only if no other did meanwhile, and otherwise decides again on
// the row the other wrote.
func (s *Store) BreakerUpdate(ctx context.Context, p *errandstore.BreakerUpdateParams) (*errandstore.BreakerUpdateResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var res *errandstore.BreakerUpdateResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for {
			var err error
			var inserted bool
			res, inserted, err = s.breakerUpdate(ctx, tx, p)
			if err != nil || inserted {
				return err
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("update breaker %s: %w", p.Dependency, badValue(err))
	}
	return res, nil
}

// breakerUpdate applies p once. done is false when it lost the race to
// insert the breaker's first row and must decide again.
func (s *Store) breakerUpdate(ctx context.Context, tx pgx.Tx, p *errandstore.BreakerUpdateParams) (res *errandstore.BreakerUpdateResult, done bool, err error) {
	nowArg := s.nowArg()
	var row breakerRow
	var now time.Time
	err = tx.QueryRow(ctx, s.breakerSQL(`SELECT `+breakerColumns+`, {now} FROM {breakers} WHERE dependency = $2 FOR UPDATE`),
		nowArg, p.Dependency).Scan(append(row.dest(), &now)...)
	if isNoRows(err) {
		err = tx.QueryRow(ctx, s.sql(`SELECT {now}`), nowArg).Scan(&now)
	}
	if err != nil {
		return nil, false, err
	}
	now = micro(now)
	cur := row.record()
	if cur == nil && p.Event == errandstore.BreakerReset {
		return nil, false, errandtype.ErrNotFound
	}
	tr := errandstore.ApplyBreakerEvent(cur, p, now)
	res = &errandstore.BreakerUpdateResult{Breaker: tr.Next, Applied: tr.Applied}
	if !tr.Changed {
		return res, true, nil
	}
	b := tr.Next
	args := []any{b.Dependency, string(b.State), b.Failures, b.FailingSince, b.OpenedAt, b.OpenUntil,
		b.Probes, b.ProbeUntil, b.Trips, b.LastError, b.UpdatedAt}
	if cur == nil {
		n, err := tx.Exec(ctx, s.breakerSQL(`INSERT INTO {breakers} (`+breakerColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (dependency) DO NOTHING`), args...)
		if err != nil {
			return nil, false, err
		}
		if n.RowsAffected() == 0 {
			return nil, false, nil
		}
	} else if _, err := tx.Exec(ctx, s.breakerSQL(`UPDATE {breakers} SET state = $2, failures = $3, failing_since = $4,
			opened_at = $5, open_until = $6, probes = $7, probe_until = $8, trips = $9, last_error = $10, updated_at = $11
			WHERE dependency = $1`), args...); err != nil {
		return nil, false, err
	}
	if p.Event != errandstore.BreakerReset {
		return res, true, nil
	}
	details, err := json.Marshal(errandstore.BreakerResetDetails{Dependency: p.Dependency, PriorState: cur.State, Failures: cur.Failures})
	if err != nil {
		return nil, false, err
	}
	err = s.insertAudit(ctx, tx, now, &auditEntry{action: errandtype.AuditBreakerReset, operator: p.Operator, reason: p.Reason, details: details})
	return res, err == nil, err
}

// BreakerList implements [errandstore.BreakerStore]. The store's time comes with
// the rows, from a one-row table they are joined to, so that an empty list
// has it too.
func (s *Store) BreakerList(ctx context.Context, p *errandstore.BreakerListParams) (*errandstore.BreakerListResult, error) {
	var deps []string
	if len(p.Dependencies) > 0 {
		deps = storableOnly(p.Dependencies) // not nil: every breaker
	}
	rows, err := s.pool.Query(ctx, s.breakerSQL(`SELECT n.now, b.dependency, b.state, b.failures, b.failing_since,
			b.opened_at, b.open_until, b.probes, b.probe_until, b.trips, b.last_error, b.updated_at
		FROM (SELECT {now} AS now) n
		LEFT JOIN {breakers} b ON $2::text[] IS NULL OR b.dependency = ANY($2::text[])
		ORDER BY b.dependency`), s.nowArg(), deps)
	if err != nil {
		return nil, fmt.Errorf("list breakers: %w", err)
	}
	defer rows.Close()
	res := &errandstore.BreakerListResult{Breakers: []*errandtype.BreakerRecord{}}
	for rows.Next() {
		var row breakerRow
		var now time.Time
		if err := rows.Scan(append([]any{&now}, row.dest()...)...); err != nil {
			return nil, fmt.Errorf("list breakers: %w", err)
		}
		res.Now = micro(now)
		if b := row.record(); b != nil {
			res.Breakers = append(res.Breakers, b)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list breakers: %w", err)
	}
	return res, nil
}

// BreakerKindsDeclare implements [errandstore.BreakerStore]: one statement
// removes the kinds that name no dependency and records the others.
func (s *Store) BreakerKindsDeclare(ctx context.Context, p *errandstore.BreakerKindsDeclareParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	var none, kinds, deps []string
	for _, k := range p.Kinds {
		if k.Dependency == "" {
			none = append(none, k.Kind)
		} else {
			kinds, deps = append(kinds, k.Kind), append(deps, k.Dependency)
		}
	}
	_, err := s.pool.Exec(ctx, s.breakerSQL(`WITH gone AS (DELETE FROM {kind_deps} WHERE kind = ANY($2::text[]))
		INSERT INTO {kind_deps} (kind, dependency, declared_at)
		SELECT k, d, {now} FROM unnest($3::text[], $4::text[]) AS u(k, d)
		ON CONFLICT (kind) DO UPDATE SET dependency = excluded.dependency, declared_at = excluded.declared_at`),
		s.nowArg(), none, kinds, deps)
	if err != nil {
		return fmt.Errorf("declare kinds' dependencies: %w", badValue(err))
	}
	return nil
}

// BreakerKindsList implements [errandstore.BreakerStore].
func (s *Store) BreakerKindsList(ctx context.Context) ([]errandstore.KindDependency, error) {
	rows, err := s.pool.Query(ctx, s.breakerSQL(`SELECT kind, dependency, declared_at FROM {kind_deps} ORDER BY kind`))
	if err != nil {
		return nil, fmt.Errorf("list kinds' dependencies: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (errandstore.KindDependency, error) {
		var k errandstore.KindDependency
		err := r.Scan(&k.Kind, &k.Dependency, &k.DeclaredAt)
		k.DeclaredAt = k.DeclaredAt.UTC()
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("list kinds' dependencies: %w", err)
	}
	return out, nil
}
