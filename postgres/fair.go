package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5"
)

// fairClaimable is what a fair claim's candidate j must be, besides being
// of the queue ($4): waiting, available, of a wanted kind ($5, NULL: every
// kind), and free by the ordering-key rule.
var fairClaimable = `state IN (` + waiting + `) AND available_at <= {now}
			` + wantedKind + `
			AND ` + orderingFree

// fairPick picks a fair claim's jobs. fair_keys walks the fair index from
// key to key, one seek each (a loose index scan, which PostgreSQL does not
// do by itself), without reading a key's jobs. For each key a LATERAL
// reads and locks its first Limit claimable jobs in claim order, skipping
// rows another claimer holds; those without a key come from the claim
// index's range of them (the fair index holds only jobs with a key).
// errandstore.FairPickSQL ranks them and takes Limit.
// Rows locked but not picked stay locked only until this short transaction
// ends.
var fairPick = `WITH RECURSIVE fair_keys(k) AS (
			(SELECT fairness_key FROM {jobs}
				WHERE queue = $4::text AND state IN (` + waiting + `) AND fairness_key IS NOT NULL
				ORDER BY fairness_key LIMIT 1)
			UNION ALL
			SELECT (SELECT fairness_key FROM {jobs}
				WHERE queue = $4::text AND state IN (` + waiting + `) AND fairness_key > fair_keys.k
				ORDER BY fairness_key LIMIT 1)
			FROM fair_keys WHERE fair_keys.k IS NOT NULL)
		` + errandstore.FairPickSQL(`SELECT c.* FROM fair_keys CROSS JOIN LATERAL (
				SELECT seq, priority, available_at, fairness_key FROM {jobs} j
				WHERE queue = $4::text AND fairness_key = fair_keys.k AND `+fairClaimable+`
				ORDER BY priority, available_at, seq
				LIMIT $6
				FOR UPDATE SKIP LOCKED) c
			WHERE fair_keys.k IS NOT NULL
			UNION ALL
			SELECT * FROM (SELECT seq, priority, available_at, fairness_key FROM {jobs} j
				WHERE queue = $4::text AND fairness_key IS NULL AND `+fairClaimable+`
				ORDER BY priority, available_at, seq
				LIMIT $6
				FOR UPDATE SKIP LOCKED) n`, "{fair_turns}", "$4::text", "$6")

// fairClaimSQL claims as claimSQL does and, in the same statement, gives
// the keys it served the queue's next turn, in key order so that
// concurrent claims lock turn rows in one order and cannot deadlock.
// fairClaimSkipSQL leaves out the retries of the kinds $7, as
// claimOneSkipSQL does.
var (
	fairClaimSQL     = fairClaimWith(fairPick)
	fairClaimSkipSQL = fairClaimWith(strings.ReplaceAll(fairPick, wantedKind, wantedKind+skipRetryKinds))
)

func fairClaimWith(pick string) string {
	return `WITH claimed AS (` + replacePick(claimSQL, pick) + `),
	served AS (INSERT INTO {fair_turns} (queue, fairness_key, turn, served_at)
		SELECT $4::text, k.key, (SELECT coalesce(max(turn), 0) + 1 FROM {fair_turns} WHERE queue = $4::text), {now}
		FROM (SELECT DISTINCT coalesce(fairness_key, '` + errandstore.FairTurnKey + `') AS key FROM claimed) k
		ORDER BY k.key
		ON CONFLICT (queue, fairness_key) DO UPDATE SET turn = excluded.turn, served_at = excluded.served_at)
	SELECT * FROM claimed`
}

// JobClaimFair implements [errandstore.FairClaimer]: the sweeps and the fair
// claim in one pipelined batch, as JobClaimMany sends them.
func (s *Store) JobClaimFair(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
	if err := errandstore.ValidateFairClaim(p); err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		jobs, err := s.claimFairOnce(ctx, p)
		if try < claimTries && orderingRace(err) {
			continue
		}
		return jobs, err
	}
}

// claimFairOnce is one try of JobClaimFair.
func (s *Store) claimFairOnce(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
	var kinds []string // NULL: every kind
	if len(p.Kinds) > 0 {
		kinds = p.Kinds
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("fair claim: %w", err)
	}
	defer conn.Release()
	now := s.nowArg()
	b := &pgx.Batch{}
	b.Queue(beginSQL)
	s.queueSweep(b, now)
	if len(p.SkipRetryKinds) > 0 {
		b.Queue(s.sql(fairClaimSkipSQL), now, us(p.Lease), p.Owner, p.Queues[0], kinds, p.Limit, p.SkipRetryKinds)
	} else {
		b.Queue(s.sql(fairClaimSQL), now, us(p.Lease), p.Owner, p.Queues[0], kinds, p.Limit)
	}
	b.Queue("COMMIT")
	br := conn.SendBatch(ctx, b)
	jobs, unread, err := func() ([]*errandtype.Job, []errandstore.UnreadJob, error) {
		if _, err := br.Exec(); err != nil {
			return nil, nil, err
		}
		if _, err := readSweep(br); err != nil {
			return nil, nil, err
		}
		return readClaimed(br)
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.abortClaim(ctx, conn, false)
		return nil, fmt.Errorf("fair claim: %w", err)
	}
	conn.Release() // the give-back takes a connection of its own
	errandstore.GiveBackUnread(ctx, s, s.logger, unread)
	errandstore.SortFairClaimOrder(jobs)
	return jobs, nil
}

// FairnessKeysWaiting implements [errandstore.FairClaimer].
func (s *Store) FairnessKeysWaiting(ctx context.Context, p *errandstore.FairnessKeysParams) ([]errandtype.FairnessKeyCount, error) {
	if !errandtype.StorableText(p.Queue) {
		return []errandtype.FairnessKeyCount{}, nil // no job is in such a queue
	}
	rs, err := s.pool.Query(ctx, s.sql(`SELECT queue, fairness_key, count(*) FROM {jobs}
		WHERE state IN (`+waiting+`) AND fairness_key IS NOT NULL AND ($1::text = '' OR queue = $1)
		GROUP BY queue, fairness_key`), p.Queue)
	if err != nil {
		return nil, fmt.Errorf("fairness keys: %w", err)
	}
	counts, err := pgx.CollectRows(rs, func(row pgx.CollectableRow) (errandtype.FairnessKeyCount, error) {
		var c errandtype.FairnessKeyCount
		err := row.Scan(&c.Queue, &c.Key, &c.Waiting)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("fairness keys: %w", err)
	}
	return errandstore.TopFairnessKeys(counts, p.Limit), nil
}

var _ errandstore.FairClaimer = (*Store)(nil)

// FairTurnPrune implements [errandstore.FairTurnPruner]. Whether a key has a
// waiting job is one seek of the fair index; the turn of the jobs without
// a key, one row per queue, is kept.
func (s *Store) FairTurnPrune(ctx context.Context, p *errandstore.FairTurnPruneParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, s.sql(`DELETE FROM {fair_turns} t
		WHERE t.served_at <= {now} - $2 * interval '1 microsecond' AND t.fairness_key <> '`+errandstore.FairTurnKey+`'
			AND NOT EXISTS (SELECT 1 FROM {jobs} j
				WHERE j.queue = t.queue AND j.fairness_key = t.fairness_key AND j.state IN (`+waiting+`))`),
		s.nowArg(), us(p.IdleFor))
	if err != nil {
		return 0, fmt.Errorf("prune fair turns: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

var _ errandstore.FairTurnPruner = (*Store)(nil)
