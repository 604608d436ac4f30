-- pgbench script: split_migrate.sql's tables. One claim of :batch jobs,
-- as cur_cycle.sql (the claim and the sweeps are errand's, unchanged: they
-- read errand_jobs, now the unfinished jobs alone), and their
-- acknowledgment as a move: one statement deletes each job from
-- errand_jobs and inserts it, succeeded, into errand_jobs_done. (A
-- production statement would move the terminal outcomes and update the
-- others, retries and snoozes, in place.)
--   pgbench -n -f split_cycle.sql -D batch=500 -t 40 URL
BEGIN;
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
WITH c AS (UPDATE "errand".errand_jobs SET
			state = 'running', attempt = attempt + 1, attempted_at = coalesce(NULL::timestamptz, now()),
			lease_token = replace(gen_random_uuid()::text, '-', ''),
			lease_until = coalesce(NULL::timestamptz, now()) + 30000000 * interval '1 microsecond', lease_owner = 'bench'
		WHERE seq = ANY(ARRAY(SELECT c.seq FROM (SELECT 'default'::text AS name) q CROSS JOIN unnest('{true,false}'::boolean[]) AS k(unkeyed) CROSS JOIN LATERAL (
				SELECT seq, priority, available_at FROM "errand".errand_jobs j
				WHERE queue = q.name AND (fairness_key IS NULL) = k.unkeyed AND state IN ('queued', 'retrying') AND available_at <= coalesce(NULL::timestamptz, now())
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
		RETURNING id, lease_token)
SELECT coalesce(array_agg(id), '{}')::text AS ids, coalesce(array_agg(lease_token), '{}')::text AS toks FROM c \gset
COMMIT;
WITH o AS (SELECT u.id, u.token, u.ord FROM unnest(':ids'::text[], ':toks'::text[]) WITH ORDINALITY AS u(id, token, ord)),
	d AS (DELETE FROM "errand".errand_jobs j USING o
		WHERE j.id = o.id AND j.state = 'running' AND j.lease_token = o.token AND j.lease_until > coalesce(NULL::timestamptz, now())
		RETURNING j.*, o.ord),
	ins AS (INSERT INTO "errand".errand_jobs_done (seq, id, queue, kind, args, args_version, priority, state, attempt, max_attempts, backoff_base_us, backoff_max_us, max_age_us, available_at, deadline, lease_token, lease_until, lease_owner, unique_key, ordering_key, progress, created_at, attempted_at, finished_at, last_error, errors, replays, tags, unique_states, unique_window_us, ordering_hold, fairness_key, batch_id, cancel_requested_at, workflow_id, output)
		SELECT d.seq, d.id, d.queue, d.kind, d.args, d.args_version, d.priority, 'succeeded', d.attempt, d.max_attempts, d.backoff_base_us, d.backoff_max_us, d.max_age_us, d.available_at, d.deadline, NULL, NULL, d.lease_owner, d.unique_key, d.ordering_key, d.progress, d.created_at, d.attempted_at, coalesce(NULL::timestamptz, now()), d.last_error, d.errors, d.replays, d.tags, d.unique_states, d.unique_window_us, d.ordering_hold, d.fairness_key, d.batch_id, d.cancel_requested_at, d.workflow_id, d.output FROM d
		RETURNING id, state, available_at)
SELECT d.ord, ins.state, ins.available_at FROM ins JOIN d USING (id);
