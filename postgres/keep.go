package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/jackc/pgx/v5"
)

var _ errandstore.TableKeeper = (*Store)(nil)

// vacuumMinDead and vacuumDeadShare decide when errand vacuums errand_jobs:
// once its dead rows pass vacuumMinDead plus 1/vacuumDeadShare of its live
// ones. Every claim walks the dead entries at the head of the claim index
// until a vacuum removes them: with a million finished jobs never
// vacuumed, the first claims ran at 0.3× an empty table's rate, and a
// 3-second vacuum gave it back (bench/pghistory). The migration has
// autovacuum vacuum the table after 2% of it changed, so where autovacuum
// is on and keeps up this threshold is never reached; it is for servers
// that run with autovacuum off, or behind. The share bounds what the
// vacuums cost a job on a table that keeps a long history, since each
// reads all of its indexes.
const (
	vacuumMinDead   = 10_000
	vacuumDeadShare = 20
)

// vacuumDue reports whether a table of live and dead rows is vacuumed.
func vacuumDue(live, dead int64) bool { return dead >= vacuumMinDead+live/vacuumDeadShare }

// keepStatsSQL reads what TableKeep decides on: the live and dead rows of
// errand_jobs ($1) as the database counts them, and whether this role may
// vacuum it (its owner's or the database owner's, or a superuser).
const keepStatsSQL = `SELECT coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0),
		pg_has_role(c.relowner, 'USAGE')
			OR pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE')
	FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
	WHERE c.oid = $1::regclass`

// TableKeep implements [errandstore.TableKeeper]: it vacuums errand_jobs
// when its dead rows are due (see vacuumDue), unless Options.NoVacuum. The
// vacuum cleans the indexes whatever share of the heap holds dead rows
// (INDEX_CLEANUP ON: PostgreSQL skips them below 2% of its pages, which on
// a table with a long history leaves a claim's dead entries in place) and
// skips the table when another vacuum holds it (SKIP_LOCKED). It takes no
// lock that blocks a claim, an enqueue or an acknowledgment.
func (s *Store) TableKeep(ctx context.Context, _ *errandstore.TableKeepParams) (errandstore.TableKeepResult, error) {
	var r errandstore.TableKeepResult
	if s.noVacuum {
		return r, nil
	}
	var may bool
	if err := s.pool.QueryRow(ctx, keepStatsSQL, s.table("errand_jobs")).Scan(&r.Live, &r.Dead, &may); err != nil {
		return r, fmt.Errorf("jobs table upkeep: %w", err)
	}
	if !vacuumDue(r.Live, r.Dead) {
		return r, nil
	}
	if !may {
		r.Note = fmt.Sprintf("this role may not vacuum %s: run errand as the table's owner, or keep autovacuum on and set postgres.Options.NoVacuum",
			s.table("errand_jobs"))
		return r, nil
	}
	start := time.Now()
	if _, err := s.pool.Exec(ctx, "VACUUM (INDEX_CLEANUP ON, SKIP_LOCKED) "+s.table("errand_jobs"), pgx.QueryExecModeSimpleProtocol); err != nil {
		return r, fmt.Errorf("jobs table upkeep: vacuum: %w", err)
	}
	r.Done, r.Took = true, time.Since(start)
	return r, nil
}
