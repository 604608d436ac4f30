-- With two query changes: the lease sweep reads errand_jobs_lease in
-- order (ORDER BY lease_until LIMIT 1000, bitmap scans off for the
-- sweeps: SET LOCAL), an index scan, which marks the
-- entries of dead row versions dead in the index (a bitmap scan never
-- does); and the claim starts after a cursor, as cursor_cycle.sql.
-- cur_cycle.sql with a cursor: each claim starts its walk of the claim
-- index after the last job the previous claim took (priority,
-- available_at, seq), a lower bound that skips the index entries of jobs
-- already claimed. A measurement, not a proposal as is: a job that
-- becomes waiting behind the cursor (a retry due earlier, a higher
-- priority, a replay) is missed until a claim without the cursor.
-- pgbench script: one claim of :batch jobs and their acknowledgment, each
-- in its own transaction, with the two sweeps in the claim's transaction
-- as errand sends them when a sweep is due. The statements are errand's
-- (postgres/jobs.go), parameters inlined; the claim returns only the ids
-- and tokens, which the acknowledgment sends back.
--   pgbench -n -f cur_fix_cycle.sql -D batch=500 -D cp=-2147483648 -D ca=-infinity -D cs=0 -t 40 URL
BEGIN;
SET LOCAL enable_bitmapscan = off;
UPDATE "errand".errand_jobs SET
			errors = errors || jsonb_build_array(jsonb_build_object('attempt', attempt, 'replay', replays, 'at', (rtrim(rtrim(to_char(coalesce(NULL::timestamptz, now()) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '0'), '.') || 'Z'), 'class', m.class, 'message', m.message, 'stack', '')),
			last_error = jsonb_build_object('class', m.class, 'message', m.message, 'at', (rtrim(rtrim(to_char(coalesce(NULL::timestamptz, now()) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '0'), '.') || 'Z')),
			state = m.state,
			finished_at = CASE WHEN m.state = 'retrying' THEN finished_at ELSE coalesce(NULL::timestamptz, now()) END,
			available_at = CASE WHEN m.state = 'retrying' THEN coalesce(NULL::timestamptz, now()) ELSE available_at END,
			lease_token = NULL, lease_until = NULL
		FROM (SELECT CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled by sweep'::text
					WHEN attempt >= max_attempts THEN 'lease expired' || ' on the final attempt' ELSE 'lease expired' END AS message,
				CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'::text ELSE 'lease_expired'::text END AS class,
				CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
					WHEN attempt >= max_attempts THEN 'dead' ELSE 'retrying' END AS state,
				seq AS mseq
			FROM "errand".errand_jobs WHERE state = 'running' AND lease_until <= coalesce(NULL::timestamptz, now())
			ORDER BY lease_until LIMIT 1000
			FOR UPDATE SKIP LOCKED) m
		WHERE seq = m.mseq
		RETURNING m.state;
UPDATE "errand".errand_jobs SET
			errors = errors || jsonb_build_array(jsonb_build_object('attempt', attempt, 'replay', replays, 'at', (rtrim(rtrim(to_char(coalesce(NULL::timestamptz, now()) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '0'), '.') || 'Z'), 'class', 'expired'::text, 'message', 'deadline passed before the job could run'::text, 'stack', '')),
			last_error = jsonb_build_object('class', 'expired'::text, 'message', 'deadline passed before the job could run'::text, 'at', (rtrim(rtrim(to_char(coalesce(NULL::timestamptz, now()) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '0'), '.') || 'Z')),
			state = 'dead', finished_at = coalesce(NULL::timestamptz, now())
		WHERE seq IN (SELECT seq FROM "errand".errand_jobs
			WHERE state IN ('queued', 'retrying') AND deadline IS NOT NULL AND deadline <= coalesce(NULL::timestamptz, now())
			FOR UPDATE SKIP LOCKED);
SET LOCAL enable_bitmapscan TO DEFAULT;
WITH c AS (UPDATE "errand".errand_jobs SET
			state = 'running', attempt = attempt + 1, attempted_at = coalesce(NULL::timestamptz, now()),
			lease_token = replace(gen_random_uuid()::text, '-', ''),
			lease_until = coalesce(NULL::timestamptz, now()) + 30000000 * interval '1 microsecond', lease_owner = 'bench'
		WHERE seq = ANY(ARRAY(SELECT c.seq FROM (SELECT 'default'::text AS name) q CROSS JOIN unnest('{true,false}'::boolean[]) AS k(unkeyed) CROSS JOIN LATERAL (
				SELECT seq, priority, available_at FROM "errand".errand_jobs j
				WHERE queue = q.name AND (fairness_key IS NULL) = k.unkeyed AND state IN ('queued', 'retrying') AND available_at <= coalesce(NULL::timestamptz, now())
					AND (priority, available_at, seq) > (:cp, ':ca'::timestamptz, :cs)
					AND (deadline IS NULL OR deadline > coalesce(NULL::timestamptz, now()))
					AND ('{noop}'::text[] IS NULL OR kind || '' = ANY('{noop}'))
					AND (j.ordering_key IS NULL OR NOT EXISTS (SELECT 1 FROM "errand".errand_jobs o
			WHERE o.ordering_key = j.ordering_key AND (o.state IN ('queued', 'running', 'retrying') OR (o.state = 'dead' AND o.ordering_hold = 1))
				AND (o.state = 'running' OR o.seq < j.seq)))
				ORDER BY priority, available_at, seq
				LIMIT :batch
				FOR UPDATE SKIP LOCKED) c
			ORDER BY c.priority, c.available_at, c.seq
			LIMIT :batch))
		RETURNING id, lease_token, priority, available_at, seq)
SELECT coalesce(array_agg(id), '{}')::text AS ids, coalesce(array_agg(lease_token), '{}')::text AS toks,
	coalesce(l.priority, :cp) AS cp, coalesce(l.available_at::text, ':ca') AS ca, coalesce(l.seq, :cs) AS cs
FROM c LEFT JOIN LATERAL (SELECT priority, available_at, seq FROM c ORDER BY priority DESC, available_at DESC, seq DESC LIMIT 1) l ON true
GROUP BY l.priority, l.available_at, l.seq \gset
COMMIT;
UPDATE "errand".errand_jobs j SET
			state = CASE WHEN j.cancel_requested_at IS NOT NULL AND o.kind IN ('retry', 'snooze', 'interrupted')
				THEN 'cancelled' ELSE CASE o.kind WHEN 'succeeded' THEN 'succeeded' WHEN 'retry' THEN 'retrying' WHEN 'dead' THEN 'dead' WHEN 'snooze' THEN 'queued' WHEN 'interrupted' THEN 'queued' WHEN 'cancelled' THEN 'cancelled' END END,
			attempt = CASE WHEN o.kind IN ('snooze', 'interrupted')
				THEN j.attempt - 1 ELSE j.attempt END,
			available_at = CASE
				WHEN o.kind IN ('retry', 'snooze')
					THEN coalesce(NULL::timestamptz, now()) + o.delay_us * interval '1 microsecond'
				WHEN o.kind IN ('retry', 'snooze', 'interrupted') THEN coalesce(NULL::timestamptz, now())
				ELSE j.available_at END,
			finished_at = CASE WHEN o.kind IN ('succeeded', 'dead', 'cancelled')
					OR (j.cancel_requested_at IS NOT NULL AND o.kind IN ('retry', 'snooze', 'interrupted'))
				THEN coalesce(NULL::timestamptz, now()) ELSE j.finished_at END,
			errors = CASE WHEN o.class IS NULL THEN j.errors ELSE j.errors || jsonb_build_array(jsonb_build_object('attempt', o.attempt, 'replay', replays, 'at', (rtrim(rtrim(to_char(coalesce(NULL::timestamptz, now()) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '0'), '.') || 'Z'), 'class', o.class, 'message', o.message, 'stack', o.stack)) END,
			last_error = CASE WHEN o.class IS NULL THEN j.last_error ELSE jsonb_build_object('class', o.class, 'message', o.message, 'at', (rtrim(rtrim(to_char(coalesce(NULL::timestamptz, now()) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '0'), '.') || 'Z')) END,
			lease_token = NULL, lease_until = NULL
		FROM (SELECT u.id, u.token, u.kind, 0::bigint AS delay_us, 0::integer AS attempt,
				NULL::text AS class, ''::text AS message, ''::text AS stack, u.ord
			FROM unnest(':ids'::text[], ':toks'::text[], array_fill('succeeded'::text, ARRAY[cardinality(':ids'::text[])])::text[]) WITH ORDINALITY AS u(id, token, kind, ord)) AS o
		WHERE j.id = o.id AND j.state = 'running' AND j.lease_token = o.token AND j.lease_until > coalesce(NULL::timestamptz, now())
		RETURNING o.ord, j.state, j.available_at;
