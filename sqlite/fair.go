package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// fairClaimSQL is the claim of JobClaimFair for that many kinds (no kinds:
// every kind). Its numbered parameters are attempted_at (?1), lease_until
// (?2), lease_owner (?3), now (?4), the queue (?5), the limit (?6), the
// kinds (?7 on), then the kinds whose retries are left out (skip of them,
// for a worker whose retry budget is spent). fair_keys walks the fair
// index from key to key, one seek each, without reading a key's jobs;
// each key's first limit claimable jobs are then read in claim order
// through the same index, and those without a key by the seek
// fairness_key IS NULL. The index is named, as
// the claim's is: the claim and due indexes also match queue and state,
// and a walk through either would read a key's whole backlog.
func fairClaimSQL(kinds, skip int) string {
	kindFilter := ""
	if kinds > 0 {
		kindFilter = " AND j.kind IN (" + numbered(7, kinds) + ")"
	}
	if skip > 0 {
		kindFilter += " AND NOT (j.attempt > 0 AND j.kind IN (" + numbered(7+kinds, skip) + "))"
	}
	claimable := `j.state IN (` + waiting + `) AND j.available_at <= ?4` + kindFilter + `
				AND ` + errandstore.OrderingFreeSQL("errand_jobs")
	candidates := `SELECT c.seq, c.priority, c.available_at, c.fairness_key FROM fair_keys, errand_jobs c
			WHERE fair_keys.k IS NOT NULL AND c.seq IN (SELECT j.seq FROM errand_jobs j INDEXED BY errand_jobs_fair
				WHERE j.queue = ?5 AND j.fairness_key = fair_keys.k AND ` + claimable + `
				ORDER BY j.priority, j.available_at, j.seq LIMIT ?6)
		UNION ALL
		SELECT * FROM (SELECT j.seq, j.priority, j.available_at, j.fairness_key FROM errand_jobs j INDEXED BY errand_jobs_fair
			WHERE j.queue = ?5 AND j.fairness_key IS NULL AND ` + claimable + `
			ORDER BY j.priority, j.available_at, j.seq LIMIT ?6)`
	return `UPDATE errand_jobs SET
			state = 'running', attempt = attempt + 1, ` + firstStartDeadline + `, attempted_at = ?1,
			lease_token = lower(hex(randomblob(16))), lease_until = ?2, lease_owner = ?3
		WHERE seq IN (WITH RECURSIVE fair_keys(k) AS (
				SELECT (SELECT fairness_key FROM errand_jobs INDEXED BY errand_jobs_fair
					WHERE queue = ?5 AND state IN (` + waiting + `) AND fairness_key IS NOT NULL
					ORDER BY fairness_key LIMIT 1)
				UNION ALL
				SELECT (SELECT fairness_key FROM errand_jobs INDEXED BY errand_jobs_fair
					WHERE queue = ?5 AND state IN (` + waiting + `) AND fairness_key > fair_keys.k
					ORDER BY fairness_key LIMIT 1)
				FROM fair_keys WHERE fair_keys.k IS NOT NULL)
			` + errandstore.FairPickSQL(candidates, "errand_fair_turns", "?5", "?6") + `)
		RETURNING ` + jobColumns
}

// numbered returns n numbered parameters from ?from on: "?7, ?8".
func numbered(from, n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = "?" + strconv.Itoa(from+i)
	}
	return strings.Join(ps, ", ")
}

// fairTurnSQL gives the keys a fair claim served (?2, a JSON array) the
// queue's (?1) next turn, served at ?3. "WHERE true" tells the parser that
// ON CONFLICT is the upsert's, not a join's.
const fairTurnSQL = `INSERT INTO errand_fair_turns (queue, fairness_key, turn, served_at)
	SELECT ?1, k.value, (SELECT coalesce(max(turn), 0) + 1 FROM errand_fair_turns WHERE queue = ?1), ?3
	FROM json_each(?2) k WHERE true
	ON CONFLICT (queue, fairness_key) DO UPDATE SET turn = excluded.turn, served_at = excluded.served_at`

// JobClaimFair implements [errandstore.FairClaimer]: the sweep and the claim in
// one write transaction, as JobClaimMany.
func (s *Store) JobClaimFair(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
	if err := errandstore.ValidateFairClaim(p); err != nil {
		return nil, err
	}
	var (
		jobs   []*errandtype.Job
		unread []errandstore.UnreadJob
	)
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		if _, err := s.sweep(ctx, tx, now); err != nil {
			return err
		}
		args := []any{micros(now), micros(now.Add(p.Lease)), p.Owner, micros(now), p.Queues[0], p.Limit}
		for _, k := range p.Kinds {
			args = append(args, k)
		}
		for _, k := range p.SkipRetryKinds {
			args = append(args, k)
		}
		rows, err := tx.QueryContext(ctx, fairClaimSQL(len(p.Kinds), len(p.SkipRetryKinds)), args...)
		if err != nil {
			return err
		}
		jobs, unread, err = claimedRows(rows)
		if err != nil || len(jobs) == 0 {
			return err
		}
		keys, err := json.Marshal(errandstore.FairTurnKeys(jobs))
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, fairTurnSQL, p.Queues[0], string(keys), micros(now))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fair claim: %w", err)
	}
	errandstore.GiveBackUnread(ctx, s, s.logger, unread)
	errandstore.SortFairClaimOrder(jobs)
	return jobs, nil
}

// FairnessKeysWaiting implements [errandstore.FairClaimer]. The count reads the
// fair index alone.
func (s *Store) FairnessKeysWaiting(ctx context.Context, p *errandstore.FairnessKeysParams) ([]errandtype.FairnessKeyCount, error) {
	q := `SELECT queue, fairness_key, count(*) FROM errand_jobs INDEXED BY errand_jobs_fair
		WHERE state IN (` + waiting + `) AND fairness_key IS NOT NULL`
	var args []any
	if p.Queue != "" {
		q += ` AND queue = ?`
		args = append(args, p.Queue)
	}
	rows, err := s.read.QueryContext(ctx, q+` GROUP BY queue, fairness_key`, args...)
	if err != nil {
		return nil, fmt.Errorf("fairness keys: %w", err)
	}
	defer rows.Close()
	var counts []errandtype.FairnessKeyCount
	for rows.Next() {
		var c errandtype.FairnessKeyCount
		if err := rows.Scan(&c.Queue, &c.Key, &c.Waiting); err != nil {
			return nil, fmt.Errorf("fairness keys: %w", err)
		}
		counts = append(counts, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("fairness keys: %w", err)
	}
	return errandstore.TopFairnessKeys(counts, p.Limit), nil
}

// FairTurnPrune implements [errandstore.FairTurnPruner]. Whether a key has a
// waiting job is one seek of the fair index; the turn of the jobs without
// a key, one row per queue, is kept.
func (s *Store) FairTurnPrune(ctx context.Context, p *errandstore.FairTurnPruneParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		cut := micros(s.clock.Now()) - p.IdleFor.Microseconds()
		res, err := tx.ExecContext(ctx, `DELETE FROM errand_fair_turns
			WHERE served_at <= ? AND fairness_key <> '`+errandstore.FairTurnKey+`'
				AND NOT EXISTS (SELECT 1 FROM errand_jobs j INDEXED BY errand_jobs_fair
					WHERE j.queue = errand_fair_turns.queue AND j.fairness_key = errand_fair_turns.fairness_key
						AND j.state IN (`+waiting+`))`, cut)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune fair turns: %w", err)
	}
	return int(n), nil
}

var (
	_ errandstore.FairClaimer    = (*Store)(nil)
	_ errandstore.FairTurnPruner = (*Store)(nil)
)
