-- schema.sql - the PostgreSQL schema, as numbered migrations. Each block
-- after a "-- migration N" line runs once, in one transaction holding an
-- advisory lock, and is recorded in {{schema}}.migrations. {{schema}} is
-- replaced by the quoted schema name (default "jobrunner").
-- migration 1
-- Names match ^[A-Za-z0-9_.:-]{1,128}$, written as length + unbounded regex:
-- PostgreSQL's regex engine runs the bounded form about ten times slower,
-- which halves the speed of a batch insert.
CREATE TABLE {{schema}}.jobs (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text        NOT NULL
                 CHECK (length(name) BETWEEN 1 AND 128
                        AND name ~ '^[A-Za-z0-9_.:-]+$'),
    payload      jsonb       NOT NULL DEFAULT '{}',
    queue        text        NOT NULL DEFAULT 'default'
                 CHECK (length(queue) BETWEEN 1 AND 128
                        AND queue ~ '^[A-Za-z0-9_.:-]+$'),
    priority     int         NOT NULL DEFAULT 0,     -- lower runs first
    state        text        NOT NULL DEFAULT 'queued'
                 CHECK (state IN ('queued', 'running', 'dead')),
    run_at       timestamptz NOT NULL DEFAULT now(),
    attempts     int         NOT NULL DEFAULT 0,     -- counted at claim
    max_retries  int         CHECK (max_retries >= 0), -- NULL: handler's
    last_error   text,
    generation   text,                   -- handler code that last ran it
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    died_at      timestamptz,
    locked_by    text,                   -- runner token while running
    locked_until timestamptz             -- lease end while running
);
CREATE INDEX jobs_claim ON {{schema}}.jobs (priority, run_at, id)
    WHERE state = 'queued';
CREATE INDEX jobs_lease ON {{schema}}.jobs (locked_until)
    WHERE state = 'running';
CREATE INDEX jobs_locked_by ON {{schema}}.jobs (locked_by)
    WHERE state = 'running';
CREATE INDEX jobs_dead ON {{schema}}.jobs (died_at) WHERE state = 'dead';

-- Enqueues one job from SQL, inside the caller's transaction:
--   SELECT jobrunner.push('email.send', '{"to": "a@example.com"}');
--   SELECT jobrunner.push('report', run_at => now() + interval '1 hour');
CREATE FUNCTION {{schema}}.push(name text, payload jsonb DEFAULT '{}',
                                run_at timestamptz DEFAULT now(),
                                priority int DEFAULT 0,
                                queue text DEFAULT 'default',
                                max_retries int DEFAULT NULL)
RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO {{schema}}.jobs (name, payload, run_at, priority, queue,
                                 max_retries)
    VALUES (push.name, coalesce(push.payload, '{}'),
            coalesce(push.run_at, now()), coalesce(push.priority, 0),
            coalesce(push.queue, 'default'), push.max_retries)
    RETURNING id
$$;

-- Wake-ups: runners LISTEN on "<schema>_jobs" (cut to 63 bytes, the longest
-- channel name). Any insert notifies; an update notifies only when it left a
-- row queued, so a claim (queued -> running) never wakes other runners and
-- runners cannot wake each other in a loop.
CREATE FUNCTION {{schema}}.jobs_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(left(TG_TABLE_SCHEMA || '_jobs', 63), '');
    RETURN NULL;
END
$$;
CREATE FUNCTION {{schema}}.jobs_notify_queued() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM new_jobs WHERE state = 'queued') THEN
        PERFORM pg_notify(left(TG_TABLE_SCHEMA || '_jobs', 63), '');
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_inserted AFTER INSERT ON {{schema}}.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.jobs_notify();
CREATE TRIGGER jobs_requeued AFTER UPDATE ON {{schema}}.jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.jobs_notify_queued();

-- The error PostgreSQL gives for payload as jsonb, or NULL if it is valid.
-- Lets a failed batch insert name the job whose payload was refused.
CREATE FUNCTION {{schema}}.payload_error(payload text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM payload::jsonb;
    RETURN NULL;
EXCEPTION WHEN others THEN
    RETURN SQLERRM;
END
$$;
-- migration 2
-- The push rules of the runtime (jr_push_check, docs/cli.md "Push rules") for
-- the SQL function too: run_at must be a finite time before the year
-- 10000 ('infinity' would never run). Names, queue, payload and
-- max_retries are checked by the table itself.
CREATE OR REPLACE FUNCTION {{schema}}.push(name text, payload jsonb DEFAULT '{}',
                                           run_at timestamptz DEFAULT now(),
                                           priority int DEFAULT 0,
                                           queue text DEFAULT 'default',
                                           max_retries int DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    new_id bigint;
BEGIN
    IF push.run_at IS NOT NULL AND (NOT isfinite(push.run_at)
       OR push.run_at >= timestamptz '10000-01-01 00:00:00+00') THEN
        RAISE EXCEPTION 'jobrunner.push: run_at % is not a finite time before the year 10000',
            push.run_at USING ERRCODE = 'datetime_field_overflow';
    END IF;
    INSERT INTO {{schema}}.jobs (name, payload, run_at, priority, queue,
                                 max_retries)
    VALUES (push.name, coalesce(push.payload, '{}'),
            coalesce(push.run_at, now()), coalesce(push.priority, 0),
            coalesce(push.queue, 'default'), push.max_retries)
    RETURNING id INTO new_id;
    RETURN new_id;
END
$$;
-- migration 3
-- Queues and control. States gain cancelled and completed (kept for the
-- retention period when the runner is configured so); a job records when
-- it started and finished, its progress and whether a cancel was
-- requested while it ran.
ALTER TABLE {{schema}}.jobs
    DROP CONSTRAINT IF EXISTS jobs_state_check,
    ADD CONSTRAINT jobs_state_check CHECK (state IN ('queued', 'running',
        'dead', 'cancelled', 'completed')),
    ADD COLUMN started_at timestamptz,          -- last claim
    ADD COLUMN finished_at timestamptz,         -- completed, cancelled, dead
    ADD COLUMN progress_done float8,            -- NULL until reported
    ADD COLUMN progress_total float8,
    ADD COLUMN progress_note text,
    ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;
UPDATE {{schema}}.jobs SET finished_at = died_at WHERE state = 'dead';
-- the claim: per queue, in priority, run_at, id order (fair claims read
-- the first few of each queue)
DROP INDEX {{schema}}.jobs_claim;
CREATE INDEX jobs_claim ON {{schema}}.jobs (queue, priority, run_at, id)
    WHERE state = 'queued';
CREATE INDEX jobs_completed ON {{schema}}.jobs (finished_at)
    WHERE state = 'completed';
CREATE INDEX jobs_cancelled ON {{schema}}.jobs (finished_at)
    WHERE state = 'cancelled';
-- running jobs whose cancel was requested, polled by their runner
CREATE INDEX jobs_cancel ON {{schema}}.jobs (locked_by)
    WHERE state = 'running' AND cancel_requested;

-- One row per queue name ever used; paused stops every claim from it.
CREATE TABLE {{schema}}.queues (
    name       text        PRIMARY KEY
               CHECK (length(name) BETWEEN 1 AND 128
                      AND name ~ '^[A-Za-z0-9_.:-]+$'),
    paused     boolean     NOT NULL DEFAULT false,
    paused_at  timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO {{schema}}.queues (name) SELECT DISTINCT queue FROM {{schema}}.jobs;

-- Every push, plain SQL ones too, makes its queue known to claims (they
-- read the queues table to find the queues with work).
CREATE FUNCTION {{schema}}.jobs_queue_known() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {{schema}}.queues (name)
    SELECT DISTINCT n.queue FROM new_jobs n
    WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.queues q
                      WHERE q.name = n.queue)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_queue_known AFTER INSERT ON {{schema}}.jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.jobs_queue_known();
-- moving a job to another queue (claims and completions never set queue,
-- so this never fires for them)
CREATE FUNCTION {{schema}}.jobs_queue_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {{schema}}.queues (name) VALUES (NEW.queue)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_queue_moved AFTER UPDATE OF queue ON {{schema}}.jobs
    FOR EACH ROW WHEN (OLD.queue IS DISTINCT FROM NEW.queue)
    EXECUTE FUNCTION {{schema}}.jobs_queue_moved();
-- a resumed queue wakes the runners
CREATE TRIGGER queues_changed AFTER UPDATE ON {{schema}}.queues
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.jobs_notify();

-- Cancels one job from SQL, inside the caller's transaction:
--   SELECT jobrunner.cancel(42);
-- Returns 'cancelled' (it was queued or scheduled: it never runs),
-- 'cancel requested' (it is running: its runner stops it and records it
-- cancelled), 'already finished' (completed, dead or cancelled: nothing
-- changed) or 'not found'.
CREATE FUNCTION {{schema}}.cancel(id bigint) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    st text;
BEGIN
    UPDATE {{schema}}.jobs j SET
        state = CASE WHEN j.state = 'queued' THEN 'cancelled' ELSE j.state END,
        finished_at = CASE WHEN j.state = 'queued' THEN now()
                      ELSE j.finished_at END,
        cancel_requested = j.cancel_requested OR j.state = 'running',
        updated_at = now()
    WHERE j.id = cancel.id AND j.state IN ('queued', 'running')
    RETURNING j.state INTO st;
    IF st = 'cancelled' THEN
        RETURN 'cancelled';
    ELSIF st = 'running' THEN
        RETURN 'cancel requested';
    ELSIF EXISTS (SELECT 1 FROM {{schema}}.jobs j WHERE j.id = cancel.id) THEN
        RETURN 'already finished';
    END IF;
    RETURN 'not found';
END
$$;

-- Pauses and resumes a queue from SQL, inside the caller's transaction:
--   SELECT jobrunner.pause('media'); SELECT jobrunner.resume('media');
-- Pausing a queue no job has used yet creates it paused.
CREATE FUNCTION {{schema}}.pause(queue text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO {{schema}}.queues AS q (name, paused, paused_at, updated_at)
    VALUES (pause.queue, true, now(), now())
    ON CONFLICT (name) DO UPDATE
    SET paused = true, paused_at = coalesce(q.paused_at, now()),
        updated_at = now()
$$;
CREATE FUNCTION {{schema}}.resume(queue text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO {{schema}}.queues AS q (name, paused, updated_at)
    VALUES (resume.queue, false, now())
    ON CONFLICT (name) DO UPDATE
    SET paused = false, paused_at = NULL, updated_at = now()
$$;
-- migration 4
-- Unique jobs (docs/schedules.md, "Unique jobs"). A job may carry a
-- unique key: while a job of the same name and key is queued (scheduled
-- included) or running, the unique index refuses a second one, and a
-- push returns the holder's id instead. Keys are 1 to 255 bytes (text
-- holds no NUL byte).
ALTER TABLE {{schema}}.jobs ADD COLUMN unique_key text
    CHECK (octet_length(unique_key) BETWEEN 1 AND 255);
CREATE UNIQUE INDEX jobs_unique ON {{schema}}.jobs (name, unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('queued', 'running');
-- Keys held for a window (push option unique_for): a push of name and key
-- is a duplicate of job_id until held_until, whatever became of that job.
-- Expired rows are taken over by the next push of the key and deleted by
-- the runner's pruner.
CREATE TABLE {{schema}}.unique_keys (
    name       text        NOT NULL,
    unique_key text        NOT NULL,
    job_id     bigint,                   -- the job that took the key
    held_until timestamptz NOT NULL,
    PRIMARY KEY (name, unique_key)
);
CREATE INDEX unique_keys_until ON {{schema}}.unique_keys (held_until);

-- Enqueues one job, unique or not, and says what happened: outcome is
-- 'new' (inserted), 'duplicate' (the key is held: id is the holder's) or
-- 'replaced' (on_conflict => 'replace' and the holder was still queued:
-- it took this payload and run_at). A running holder is never replaced:
-- the push is a duplicate. Races between sessions are settled by the
-- unique index and by the lock on the unique_keys row.
--   SELECT * FROM jobrunner.push_unique('mail', '{}', unique_key => 'u1');
CREATE FUNCTION {{schema}}.push_unique(name text, payload jsonb DEFAULT '{}',
                                       run_at timestamptz DEFAULT now(),
                                       priority int DEFAULT 0,
                                       queue text DEFAULT 'default',
                                       max_retries int DEFAULT NULL,
                                       unique_key text DEFAULT NULL,
                                       unique_for interval DEFAULT NULL,
                                       on_conflict text DEFAULT 'keep',
                                       OUT id bigint, OUT outcome text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    p_name text := push_unique.name;
    p_key text := push_unique.unique_key;
    p_payload jsonb := coalesce(push_unique.payload, '{}');
    p_run_at timestamptz := coalesce(push_unique.run_at, now());
    p_replace boolean := coalesce(push_unique.on_conflict, 'keep') = 'replace';
    took boolean := false;
    new_id bigint;
    held_id bigint;
    held_state text;
BEGIN
    IF NOT isfinite(p_run_at)
       OR p_run_at >= timestamptz '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'jobrunner.push: run_at % is not a finite time before the year 10000',
            p_run_at USING ERRCODE = 'datetime_field_overflow';
    END IF;
    IF coalesce(push_unique.on_conflict, 'keep') NOT IN ('keep', 'replace') THEN
        RAISE EXCEPTION 'jobrunner.push: on_conflict ''%'' is not keep or replace',
            push_unique.on_conflict USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_key IS NULL AND (push_unique.unique_for IS NOT NULL OR p_replace) THEN
        RAISE EXCEPTION 'jobrunner.push: unique_for and on_conflict need a unique_key'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_key IS NOT NULL AND octet_length(p_key) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'jobrunner.push: unique_key of % bytes: a key has 1 to 255 bytes',
            octet_length(p_key) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF push_unique.unique_for < interval '0' OR NOT isfinite(push_unique.unique_for) THEN
        RAISE EXCEPTION 'jobrunner.push: unique_for % is negative or infinite',
            push_unique.unique_for USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_key IS NULL THEN
        INSERT INTO {{schema}}.jobs AS j (name, payload, run_at, priority, queue,
                                          max_retries)
        VALUES (p_name, p_payload, p_run_at, coalesce(push_unique.priority, 0),
                coalesce(push_unique.queue, 'default'), push_unique.max_retries)
        RETURNING j.id INTO new_id;
        id := new_id;
        outcome := 'new';
        RETURN;
    END IF;
    IF push_unique.unique_for > interval '0' THEN
        -- take the window if it is free; else wait for whoever holds its
        -- row lock, and see their window
        INSERT INTO {{schema}}.unique_keys AS u (name, unique_key, held_until)
        VALUES (p_name, p_key, now() + push_unique.unique_for)
        ON CONFLICT ON CONSTRAINT unique_keys_pkey DO UPDATE
        SET held_until = excluded.held_until, job_id = NULL
        WHERE u.held_until <= now()
        RETURNING true INTO took;
        took := coalesce(took, false);
    END IF;
    IF NOT took THEN
        SELECT u.job_id INTO held_id FROM {{schema}}.unique_keys u
        WHERE u.name = p_name AND u.unique_key = p_key
          AND u.held_until > now() AND u.job_id IS NOT NULL;
    END IF;
    LOOP
        IF held_id IS NULL THEN
            INSERT INTO {{schema}}.jobs AS j (name, payload, run_at, priority,
                                              queue, max_retries, unique_key)
            VALUES (p_name, p_payload, p_run_at,
                    coalesce(push_unique.priority, 0),
                    coalesce(push_unique.queue, 'default'),
                    push_unique.max_retries, p_key)
            ON CONFLICT (name, unique_key) WHERE unique_key IS NOT NULL
                AND state IN ('queued', 'running') DO NOTHING
            RETURNING j.id INTO new_id;
            IF new_id IS NOT NULL THEN
                IF took THEN
                    UPDATE {{schema}}.unique_keys u SET job_id = new_id
                    WHERE u.name = p_name AND u.unique_key = p_key;
                END IF;
                id := new_id;
                outcome := 'new';
                RETURN;
            END IF;
            -- a queued or running job holds the key; a window we took is
            -- given back (the key was not free after all)
            IF took THEN
                DELETE FROM {{schema}}.unique_keys u
                WHERE u.name = p_name AND u.unique_key = p_key;
                took := false;
            END IF;
            SELECT j.id, j.state INTO held_id, held_state
            FROM {{schema}}.jobs j
            WHERE j.name = p_name AND j.unique_key = p_key
              AND j.state IN ('queued', 'running')
            FOR UPDATE;
            -- NULL: the holder finished in between; try again
            CONTINUE WHEN held_id IS NULL;
        END IF;
        id := held_id;
        outcome := 'duplicate';
        IF p_replace THEN
            UPDATE {{schema}}.jobs j SET payload = p_payload, run_at = p_run_at,
                updated_at = now()
            WHERE j.id = held_id AND j.state = 'queued'
            RETURNING 'replaced' INTO outcome;
            outcome := coalesce(outcome, 'duplicate');
        END IF;
        RETURN;
    END LOOP;
END
$$;

-- The SQL producer's push gains the unique options; the earlier calls
-- keep working (the new parameters come last, with defaults).
--   SELECT jobrunner.push('mail', '{}', unique_key => 'user:42');
DROP FUNCTION {{schema}}.push(text, jsonb, timestamptz, int, text, int);
CREATE FUNCTION {{schema}}.push(name text, payload jsonb DEFAULT '{}',
                                run_at timestamptz DEFAULT now(),
                                priority int DEFAULT 0,
                                queue text DEFAULT 'default',
                                max_retries int DEFAULT NULL,
                                unique_key text DEFAULT NULL,
                                unique_for interval DEFAULT NULL,
                                on_conflict text DEFAULT 'keep')
RETURNS bigint LANGUAGE sql AS $$
    SELECT p.id FROM {{schema}}.push_unique(push.name, push.payload,
        push.run_at, push.priority, push.queue, push.max_retries,
        push.unique_key, push.unique_for, push.on_conflict) p
$$;
-- migration 5
-- Recurring jobs: one row per fire of a schedule, inserted with its job in
-- one transaction. The primary key makes a fire happen once whatever the
-- number of runners; the row outlives the job (the newest few are kept
-- per schedule), so a late runner's catch-up does not fire it again.
CREATE TABLE {{schema}}.schedule_fires (
    schedule   text        NOT NULL,
    fire_at    timestamptz NOT NULL,                -- the fire instant
    job_id     bigint,                              -- the job it inserted
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule, fire_at)
);
-- migration 6
-- Limits per key (docs/limits.md). A job may carry a limit key, given at
-- push or taken from its payload at push time by the path its runner
-- declared in limit_paths; the claim skips keys at their cap. Token
-- buckets of rate limits are rows refilled by time: a missing row is a
-- full bucket. Limited claims serialize on an advisory lock.
ALTER TABLE {{schema}}.jobs ADD COLUMN limit_key text
    CHECK (limit_key IS NULL OR octet_length(limit_key) BETWEEN 1 AND 256);
CREATE TABLE {{schema}}.limit_buckets (
    scope      text        NOT NULL,         -- job name, or queue:NAME
    key        text        NOT NULL DEFAULT '', -- '': the scope's own
    tokens     float8      NOT NULL,
    updated_at float8      NOT NULL,         -- epoch seconds
    PRIMARY KEY (scope, key)
);
-- job name -> payload path ("account_id", "a.b") its key is taken from
CREATE TABLE {{schema}}.limit_paths (
    name text PRIMARY KEY,
    path text NOT NULL
);
-- The key a job of name with payload gets: its given key, else the
-- payload's value at the runner-declared path (a string or number of 1 to
-- 256 bytes), else NULL (unkeyed).
CREATE FUNCTION {{schema}}.limit_key_of(name text, payload jsonb, key text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT coalesce(limit_key_of.key, (SELECT v FROM (
        SELECT payload #>> string_to_array(lp.path, '.') AS v,
               jsonb_typeof(payload #> string_to_array(lp.path, '.')) AS t
        FROM {{schema}}.limit_paths lp WHERE lp.name = limit_key_of.name) x
        WHERE t IN ('string', 'number') AND octet_length(v) BETWEEN 1 AND 256))
$$;
DROP FUNCTION {{schema}}.push(text, jsonb, timestamptz, int, text, int, text,
                              interval, text);
-- push_unique with the limit key: the job it inserts (or the queued one
-- it replaces) takes its key, given or from its payload (limit_key_of).
-- Each statement of a plpgsql function sees the one before it.
CREATE FUNCTION {{schema}}.push_keyed(name text, payload jsonb DEFAULT '{}',
                                      run_at timestamptz DEFAULT now(),
                                      priority int DEFAULT 0,
                                      queue text DEFAULT 'default',
                                      max_retries int DEFAULT NULL,
                                      unique_key text DEFAULT NULL,
                                      unique_for interval DEFAULT NULL,
                                      on_conflict text DEFAULT 'keep',
                                      key text DEFAULT NULL,
                                      OUT id bigint, OUT outcome text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    k text;
BEGIN
    SELECT p.id, p.outcome INTO push_keyed.id, push_keyed.outcome
    FROM {{schema}}.push_unique(push_keyed.name, push_keyed.payload,
        push_keyed.run_at, push_keyed.priority, push_keyed.queue,
        push_keyed.max_retries, push_keyed.unique_key, push_keyed.unique_for,
        push_keyed.on_conflict) p;
    IF push_keyed.outcome <> 'duplicate' THEN
        k := {{schema}}.limit_key_of(push_keyed.name,
                                     coalesce(push_keyed.payload, '{}'),
                                     push_keyed.key);
        IF k IS NOT NULL THEN
            UPDATE {{schema}}.jobs j SET limit_key = k
            WHERE j.id = push_keyed.id;
        END IF;
    END IF;
END
$$;
-- The SQL producer's push: the unique options (migration 4) and the limit
-- key. SELECT jobrunner.push('email.send', '{"account_id": 7}',
-- key => 'acct-7');
CREATE FUNCTION {{schema}}.push(name text, payload jsonb DEFAULT '{}',
                                run_at timestamptz DEFAULT now(),
                                priority int DEFAULT 0,
                                queue text DEFAULT 'default',
                                max_retries int DEFAULT NULL,
                                unique_key text DEFAULT NULL,
                                unique_for interval DEFAULT NULL,
                                on_conflict text DEFAULT 'keep',
                                key text DEFAULT NULL)
RETURNS bigint LANGUAGE sql AS $$
    SELECT p.id FROM {{schema}}.push_keyed(push.name, push.payload,
        push.run_at, push.priority, push.queue, push.max_retries,
        push.unique_key, push.unique_for, push.on_conflict, push.key) p
$$;
-- migration 8
-- One index fewer to keep per job (docs/performance.md): a claim's new
-- row version wrote jobs_locked_by's entry, and it served only the lease
-- renewal, every few seconds. Renewal now reads the running jobs through
-- jobs_lease (a runner's are a few hundred of them).
DROP INDEX IF EXISTS {{schema}}.jobs_locked_by;
-- migration 9
-- push_unique kept no window when its holder finished while the push
-- waited on it: the push gave its window back (the key was held), then
-- found the holder gone and inserted its job without one, so a later push
-- inside the window was new. The window is now taken at each round of the
-- loop, before each insert. The rest is migration 4's function.
CREATE OR REPLACE FUNCTION {{schema}}.push_unique(name text,
                                       payload jsonb DEFAULT '{}',
                                       run_at timestamptz DEFAULT now(),
                                       priority int DEFAULT 0,
                                       queue text DEFAULT 'default',
                                       max_retries int DEFAULT NULL,
                                       unique_key text DEFAULT NULL,
                                       unique_for interval DEFAULT NULL,
                                       on_conflict text DEFAULT 'keep',
                                       OUT id bigint, OUT outcome text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    p_name text := push_unique.name;
    p_key text := push_unique.unique_key;
    p_payload jsonb := coalesce(push_unique.payload, '{}');
    p_run_at timestamptz := coalesce(push_unique.run_at, now());
    p_replace boolean := coalesce(push_unique.on_conflict, 'keep') = 'replace';
    took boolean := false;
    new_id bigint;
    held_id bigint;
    held_state text;
BEGIN
    IF NOT isfinite(p_run_at)
       OR p_run_at >= timestamptz '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'jobrunner.push: run_at % is not a finite time before the year 10000',
            p_run_at USING ERRCODE = 'datetime_field_overflow';
    END IF;
    IF coalesce(push_unique.on_conflict, 'keep') NOT IN ('keep', 'replace') THEN
        RAISE EXCEPTION 'jobrunner.push: on_conflict ''%'' is not keep or replace',
            push_unique.on_conflict USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_key IS NULL AND (push_unique.unique_for IS NOT NULL OR p_replace) THEN
        RAISE EXCEPTION 'jobrunner.push: unique_for and on_conflict need a unique_key'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_key IS NOT NULL AND octet_length(p_key) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'jobrunner.push: unique_key of % bytes: a key has 1 to 255 bytes',
            octet_length(p_key) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF push_unique.unique_for < interval '0' OR NOT isfinite(push_unique.unique_for) THEN
        RAISE EXCEPTION 'jobrunner.push: unique_for % is negative or infinite',
            push_unique.unique_for USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_key IS NULL THEN
        INSERT INTO {{schema}}.jobs AS j (name, payload, run_at, priority, queue,
                                          max_retries)
        VALUES (p_name, p_payload, p_run_at, coalesce(push_unique.priority, 0),
                coalesce(push_unique.queue, 'default'), push_unique.max_retries)
        RETURNING j.id INTO new_id;
        id := new_id;
        outcome := 'new';
        RETURN;
    END IF;
    LOOP
        IF push_unique.unique_for > interval '0' THEN
            -- take the window if it is free; else wait for whoever holds
            -- its row lock, and see their window
            INSERT INTO {{schema}}.unique_keys AS u (name, unique_key, held_until)
            VALUES (p_name, p_key, now() + push_unique.unique_for)
            ON CONFLICT ON CONSTRAINT unique_keys_pkey DO UPDATE
            SET held_until = excluded.held_until, job_id = NULL
            WHERE u.held_until <= now()
            RETURNING true INTO took;
            took := coalesce(took, false);
        END IF;
        held_id := NULL;
        IF NOT took THEN
            SELECT u.job_id INTO held_id FROM {{schema}}.unique_keys u
            WHERE u.name = p_name AND u.unique_key = p_key
              AND u.held_until > now() AND u.job_id IS NOT NULL;
        END IF;
        IF held_id IS NULL THEN
            INSERT INTO {{schema}}.jobs AS j (name, payload, run_at, priority,
                                              queue, max_retries, unique_key)
            VALUES (p_name, p_payload, p_run_at,
                    coalesce(push_unique.priority, 0),
                    coalesce(push_unique.queue, 'default'),
                    push_unique.max_retries, p_key)
            ON CONFLICT (name, unique_key) WHERE unique_key IS NOT NULL
                AND state IN ('queued', 'running') DO NOTHING
            RETURNING j.id INTO new_id;
            IF new_id IS NOT NULL THEN
                IF took THEN
                    UPDATE {{schema}}.unique_keys u SET job_id = new_id
                    WHERE u.name = p_name AND u.unique_key = p_key;
                END IF;
                id := new_id;
                outcome := 'new';
                RETURN;
            END IF;
            -- a queued or running job holds the key; a window we took is
            -- given back (the key was not free after all)
            IF took THEN
                DELETE FROM {{schema}}.unique_keys u
                WHERE u.name = p_name AND u.unique_key = p_key;
                took := false;
            END IF;
            SELECT j.id, j.state INTO held_id, held_state
            FROM {{schema}}.jobs j
            WHERE j.name = p_name AND j.unique_key = p_key
              AND j.state IN ('queued', 'running')
            FOR UPDATE;
            -- NULL: the holder finished in between; try again, window first
            CONTINUE WHEN held_id IS NULL;
        END IF;
        id := held_id;
        outcome := 'duplicate';
        IF p_replace THEN
            UPDATE {{schema}}.jobs j SET payload = p_payload, run_at = p_run_at,
                updated_at = now()
            WHERE j.id = held_id AND j.state = 'queued'
            RETURNING 'replaced' INTO outcome;
            outcome := coalesce(outcome, 'duplicate');
        END IF;
        RETURN;
    END LOOP;
END
$$;
-- migration 10
-- Results (docs/handlers.md, "Return values"): a handler's return value,
-- NULL when it returned nothing; result_ttl, seconds a push (or a
-- producer waiting on the job) asked it to stay completed after success,
-- NULL for the runner's own; keep_until, when a completed job kept for its
-- result is pruned (NULL: retention.completed decides).
ALTER TABLE {{schema}}.jobs ADD COLUMN result jsonb,
    ADD COLUMN result_ttl double precision
        CHECK (result_ttl IS NULL OR (result_ttl > 0 AND result_ttl <= 315360000)),
    ADD COLUMN keep_until timestamptz;
CREATE INDEX jobs_kept ON {{schema}}.jobs (keep_until)
    WHERE state = 'completed' AND keep_until IS NOT NULL;
-- Final states: each job that becomes completed, dead or cancelled (and is
-- kept: a plain success is deleted) notifies "<schema>_finished" (cut to
-- 63 bytes) with the payload "<id> <state>" (docs/producers.md, "Results
-- and waiting"). A row trigger whose WHEN is checked in the executor: a
-- claim or a requeue calls no function; a renewal or a progress report
-- (no state in their SET) is not even looked at.
CREATE FUNCTION {{schema}}.jobs_notify_finished() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(left(TG_TABLE_SCHEMA || '_finished', 63),
                      NEW.id || ' ' || NEW.state);
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_finished AFTER UPDATE OF state ON {{schema}}.jobs
    FOR EACH ROW
    WHEN (NEW.state IN ('completed', 'dead', 'cancelled')
          AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION {{schema}}.jobs_notify_finished();
-- A job's state and result: (NULL, NULL) when there is no such job (never
-- pushed, or deleted at success without a result).
CREATE FUNCTION {{schema}}.outcome(id bigint, OUT state text,
                                   OUT result jsonb)
LANGUAGE sql STABLE AS $$
    SELECT j.state, j.result FROM {{schema}}.jobs j WHERE j.id = outcome.id
$$;
-- Keeps the jobs ids that are still queued or running completed for ttl
-- seconds after success, result or not, so that a waiter finds them
-- (a job with a result_ttl of its own keeps it). Returns how many.
CREATE FUNCTION {{schema}}.watch(ids bigint[], ttl double precision DEFAULT 3600)
RETURNS integer
LANGUAGE sql AS $$
    WITH w AS (
        UPDATE {{schema}}.jobs j SET result_ttl = watch.ttl
        WHERE j.id = ANY(watch.ids) AND j.state IN ('queued', 'running')
          AND j.result_ttl IS NULL
        RETURNING 1)
    SELECT count(*)::integer FROM w
$$;
-- migration 11
-- Workflows (docs/workflows.md): a job may wait for others (its parents)
-- and belong to a batch whose callbacks are pushed once every member
-- ended. States gain waiting (parents unfinished: never claimed). flow is
-- a bit set (1: the job has children, 2: it is in a batch): the triggers
-- below run only for rows with one, so a plain job's end pays a test of
-- one column. parents_left counts the unfinished parents;
-- on_parent_failure says what a parent ending dead or cancelled does to
-- the job (NULL: cancel); parents is what the handler sees as
-- job.parents, written when the job becomes ready.
ALTER TABLE {{schema}}.jobs
    DROP CONSTRAINT IF EXISTS jobs_state_check,
    ADD CONSTRAINT jobs_state_check CHECK (state IN ('queued', 'running',
        'dead', 'cancelled', 'completed', 'waiting')),
    ADD COLUMN flow smallint NOT NULL DEFAULT 0,
    ADD COLUMN parents_left int NOT NULL DEFAULT 0,
    ADD COLUMN on_parent_failure text
        CHECK (on_parent_failure IN ('cancel', 'run', 'dead')),
    ADD COLUMN batch_id bigint,
    ADD COLUMN parents jsonb;
CREATE INDEX jobs_waiting ON {{schema}}.jobs (id) WHERE state = 'waiting';
CREATE INDEX jobs_batch ON {{schema}}.jobs (batch_id)
    WHERE batch_id IS NOT NULL;
-- One row per dependency. parent_state and parent_result are written
-- once, by the transaction that records the parent's end: they outlive
-- the parent's row (a success deletes it) for the child's job.parents.
CREATE TABLE {{schema}}.job_deps (
    parent_id     bigint NOT NULL,
    child_id      bigint NOT NULL,
    parent_state  text,                  -- NULL while the parent runs
    parent_result jsonb,
    PRIMARY KEY (parent_id, child_id)
);
CREATE INDEX job_deps_child ON {{schema}}.job_deps (child_id);
-- A batch: pending counts the members not yet ended; the transaction
-- that takes it to 0 (the batch's row lock orders them) sets finished_at
-- and pushes the callbacks, so they are pushed once.
CREATE TABLE {{schema}}.batches (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    on_complete  text,                   -- job name pushed when all ended
    on_success   text,                   -- job name pushed when all completed
    payload      jsonb NOT NULL DEFAULT '{}',
    queue        text NOT NULL DEFAULT 'default',  -- of the callbacks
    results      boolean NOT NULL DEFAULT false,   -- callbacks get results
    total        int NOT NULL DEFAULT 0,
    pending      int NOT NULL DEFAULT 0,
    completed    int NOT NULL DEFAULT 0,
    dead         int NOT NULL DEFAULT 0,
    cancelled    int NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,            -- when the last member ended
    complete_job bigint,                 -- the callbacks' ids, once pushed
    success_job  bigint
);
CREATE TABLE {{schema}}.batch_jobs (
    batch_id  bigint NOT NULL,
    job_id    bigint NOT NULL,
    state     text,                      -- NULL until the member ended
    result    jsonb,
    PRIMARY KEY (batch_id, job_id)
);
-- One parent's end reaches one waiting child: one parent fewer; the
-- last makes it queued (with job.parents), a failed one cancels it or
-- makes it dead by its on_parent_failure ('run' waits for the others).
-- Returns the child's new state, NULL when it was not waiting.
CREATE FUNCTION {{schema}}.flow_edge(child bigint, parent bigint, pst text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    fail text;
    ns text;
BEGIN
    SELECT CASE WHEN pst = 'completed' THEN NULL
                ELSE coalesce(j.on_parent_failure, 'cancel') END
    INTO fail FROM {{schema}}.jobs j WHERE j.id = child;
    IF fail = 'run' THEN
        fail := NULL;
    END IF;
    UPDATE {{schema}}.jobs j SET parents_left = j.parents_left - 1,
        state = CASE WHEN fail = 'cancel' THEN 'cancelled'
                     WHEN fail = 'dead' THEN 'dead'
                     WHEN j.parents_left <= 1 THEN 'queued'
                     ELSE 'waiting' END,
        finished_at = CASE WHEN fail IS NOT NULL THEN now() END,
        died_at = CASE WHEN fail = 'dead' THEN now() END,
        last_error = CASE WHEN fail IS NOT NULL
                     THEN 'parent ' || parent || ' ended ' || pst
                     ELSE j.last_error END,
        updated_at = now()
    WHERE j.id = child AND j.state = 'waiting'
    RETURNING j.state INTO ns;
    IF ns = 'queued' THEN
        UPDATE {{schema}}.jobs j SET parents = (
            SELECT jsonb_object_agg(d.parent_id::text,
                jsonb_build_object('state', d.parent_state)
                || CASE WHEN d.parent_result IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('result', d.parent_result) END)
            FROM {{schema}}.job_deps d WHERE d.child_id = child)
        WHERE j.id = child;
    END IF;
    RETURN ns;
END
$$;
-- One member's end reaches its batch; the last pushes the callbacks.
CREATE FUNCTION {{schema}}.flow_batch(bid bigint, jid bigint, st text,
                                      res jsonb)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r {{schema}}.batches;
    pay jsonb;
    cid bigint;
    sid bigint;
BEGIN
    UPDATE {{schema}}.batch_jobs m SET state = st, result = res
    WHERE m.batch_id = bid AND m.job_id = jid AND m.state IS NULL;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE {{schema}}.batches b SET pending = b.pending - 1,
        completed = b.completed + (st = 'completed')::int,
        dead = b.dead + (st = 'dead')::int,
        cancelled = b.cancelled + (st = 'cancelled')::int,
        finished_at = CASE WHEN b.pending <= 1 THEN now() END
    WHERE b.id = bid AND b.finished_at IS NULL
    RETURNING b.* INTO r;
    IF NOT FOUND OR r.pending > 0 THEN
        RETURN;
    END IF;
    pay := jsonb_build_object('batch', r.id,
        'counts', jsonb_build_object('completed', r.completed,
                                     'dead', r.dead,
                                     'cancelled', r.cancelled),
        'members', (SELECT jsonb_agg(m.job_id ORDER BY m.job_id)
                    FROM {{schema}}.batch_jobs m WHERE m.batch_id = bid),
        'payload', r.payload);
    IF r.results THEN
        pay := pay || jsonb_build_object('results', (
            SELECT coalesce(jsonb_object_agg(m.job_id::text, m.result),
                            '{}')
            FROM {{schema}}.batch_jobs m
            WHERE m.batch_id = bid AND m.result IS NOT NULL));
    END IF;
    IF r.on_complete IS NOT NULL THEN
        INSERT INTO {{schema}}.jobs (name, payload, queue)
        VALUES (r.on_complete, pay, r.queue) RETURNING id INTO cid;
    END IF;
    IF r.on_success IS NOT NULL AND r.dead = 0 AND r.cancelled = 0 THEN
        INSERT INTO {{schema}}.jobs (name, payload, queue)
        VALUES (r.on_success, pay, r.queue) RETURNING id INTO sid;
    END IF;
    UPDATE {{schema}}.batches b SET complete_job = cid, success_job = sid
    WHERE b.id = bid;
END
$$;
-- A job's end (state st, result res) reaches its children and its batch,
-- and a child it cancels or kills reaches theirs: a list, not a
-- recursion, so a chain of any length ends in one call.
CREATE FUNCTION {{schema}}.flow_settle(jid bigint, st text, res jsonb)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    todo bigint[] := ARRAY[jid];
    sts text[] := ARRAY[st];
    ress jsonb[] := ARRAY[res];
    i int := 1;
    c record;
    ns text;
    bid bigint;
BEGIN
    PERFORM set_config('jobrunner.settling', 'on', true);
    WHILE i <= cardinality(todo) LOOP
        FOR c IN WITH u AS (
            UPDATE {{schema}}.job_deps d
            SET parent_state = sts[i], parent_result = ress[i]
            WHERE d.parent_id = todo[i] AND d.parent_state IS NULL
            RETURNING d.child_id)
            SELECT u.child_id FROM u ORDER BY u.child_id
        LOOP
            ns := {{schema}}.flow_edge(c.child_id, todo[i], sts[i]);
            IF ns IN ('cancelled', 'dead') THEN
                todo := todo || c.child_id;
                sts := sts || ns;
                ress := ress || NULL::jsonb;
            END IF;
        END LOOP;
        SELECT m.batch_id INTO bid FROM {{schema}}.batch_jobs m
        WHERE m.job_id = todo[i] AND m.state IS NULL LIMIT 1;
        IF bid IS NOT NULL THEN
            PERFORM {{schema}}.flow_batch(bid, todo[i], sts[i], ress[i]);
        END IF;
        i := i + 1;
    END LOOP;
    PERFORM set_config('jobrunner.settling', 'off', true);
END
$$;
CREATE INDEX batch_jobs_job ON {{schema}}.batch_jobs (job_id);
-- The end of a job with a flow bit, however it is recorded (a runner's
-- result, a cancel, a rescue, plain SQL): an update to a final state, or
-- the delete of a running job (a success). Deferred to the commit, so
-- the jobs a success pushes (a member adding to its own batch) are in
-- before its end counts. While flow_settle runs, its own updates are its
-- list's; their deferred events find nothing left to do.
CREATE FUNCTION {{schema}}.jobs_flow() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('jobrunner.settling', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        PERFORM {{schema}}.flow_settle(OLD.id, 'completed', OLD.result);
    ELSE
        PERFORM {{schema}}.flow_settle(NEW.id, NEW.state, NEW.result);
    END IF;
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER jobs_flow_end AFTER UPDATE OF state
    ON {{schema}}.jobs DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (OLD.flow <> 0
        AND OLD.state IN ('queued', 'running', 'waiting')
        AND NEW.state IN ('completed', 'dead', 'cancelled'))
    EXECUTE FUNCTION {{schema}}.jobs_flow();
CREATE CONSTRAINT TRIGGER jobs_flow_gone AFTER DELETE ON {{schema}}.jobs
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (OLD.flow <> 0 AND OLD.state = 'running')
    EXECUTE FUNCTION {{schema}}.jobs_flow();
-- Makes the job just pushed (id) wait for the jobs after (its parents)
-- and join batch, in the caller's transaction. A parent already ended
-- counts at once. The SQL producer's way:
--   SELECT jobrunner.link(jobrunner.push('report'), ARRAY[41, 42]);
CREATE FUNCTION {{schema}}.link(id bigint, after bigint[],
                                on_parent_failure text DEFAULT NULL,
                                batch bigint DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    child bigint := link.id;
    p bigint;
    pst text;
    pres jsonb;
    n int;
BEGIN
    IF link.on_parent_failure NOT IN ('cancel', 'run', 'dead') THEN
        RAISE EXCEPTION 'jobrunner.link: on_parent_failure ''%'' is not cancel, run or dead',
            link.on_parent_failure USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF link.batch IS NOT NULL THEN
        UPDATE {{schema}}.batches b SET total = b.total + 1,
            pending = b.pending + 1
        WHERE b.id = link.batch AND b.finished_at IS NULL;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'jobrunner.link: job %: batch % %', child,
                link.batch, CASE WHEN EXISTS (SELECT 1 FROM {{schema}}.batches b
                    WHERE b.id = link.batch) THEN 'is finished'
                    ELSE 'does not exist' END
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        INSERT INTO {{schema}}.batch_jobs (batch_id, job_id)
        VALUES (link.batch, child);
        UPDATE {{schema}}.jobs j SET batch_id = link.batch,
            flow = j.flow | 2 WHERE j.id = child;
    END IF;
    SELECT count(DISTINCT a) INTO n FROM unnest(link.after) a;
    IF n = 0 THEN
        RETURN child;
    END IF;
    UPDATE {{schema}}.jobs j SET state = 'waiting', parents_left = n,
        on_parent_failure = link.on_parent_failure
    WHERE j.id = child AND j.state = 'queued';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobrunner.link: job % is not a queued job', child
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR p IN SELECT DISTINCT a FROM unnest(link.after) a ORDER BY 1 LOOP
        IF p = child THEN
            RAISE EXCEPTION 'jobrunner.link: job % cannot wait for itself',
                child USING ERRCODE = 'invalid_parameter_value';
        END IF;
        UPDATE {{schema}}.jobs j SET flow = j.flow | 1 WHERE j.id = p
        RETURNING j.state, j.result INTO pst, pres;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'jobrunner.link: job %: unknown parent id %',
                child, p USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF pst NOT IN ('completed', 'dead', 'cancelled') THEN
            pst := NULL;
            pres := NULL;
        END IF;
        INSERT INTO {{schema}}.job_deps (parent_id, child_id, parent_state,
                                         parent_result)
        VALUES (p, child, pst, pres);
        IF pst IS NOT NULL THEN
            PERFORM {{schema}}.flow_edge(child, p, pst);
        END IF;
    END LOOP;
    RETURN child;
END
$$;
-- cancel() as migration 3's, and a waiting job is cancelled at once too.
CREATE OR REPLACE FUNCTION {{schema}}.cancel(id bigint) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    st text;
BEGIN
    UPDATE {{schema}}.jobs j SET
        state = CASE WHEN j.state IN ('queued', 'waiting') THEN 'cancelled'
                ELSE j.state END,
        finished_at = CASE WHEN j.state IN ('queued', 'waiting') THEN now()
                      ELSE j.finished_at END,
        cancel_requested = j.cancel_requested OR j.state = 'running',
        updated_at = now()
    WHERE j.id = cancel.id AND j.state IN ('queued', 'running', 'waiting')
    RETURNING j.state INTO st;
    IF st = 'cancelled' THEN
        RETURN 'cancelled';
    ELSIF st = 'running' THEN
        RETURN 'cancel requested';
    ELSIF EXISTS (SELECT 1 FROM {{schema}}.jobs j WHERE j.id = cancel.id) THEN
        RETURN 'already finished';
    END IF;
    RETURN 'not found';
END
$$;
-- watch() as migration 10's, and a waiting job can be watched too.
CREATE OR REPLACE FUNCTION {{schema}}.watch(ids bigint[],
                                            ttl double precision DEFAULT 3600)
RETURNS integer
LANGUAGE sql AS $$
    WITH w AS (
        UPDATE {{schema}}.jobs j SET result_ttl = watch.ttl
        WHERE j.id = ANY(watch.ids)
          AND j.state IN ('queued', 'running', 'waiting')
          AND j.result_ttl IS NULL
        RETURNING 1)
    SELECT count(*)::integer FROM w
$$;
-- migration 12
-- The attempt history (docs/operations.md, "Attempt history"). Each
-- failed attempt of a job (its handler's error or timeout, a worker's
-- death blamed on it, a lease lost with its runner) appends
-- {"attempt", "error", "at", "duration", "runner", "worker",
-- "generation"} to attempt_log, a JSON array of the newest 20
-- (JR_ATTEMPTS_KEPT), in the statement that records the failure ("at" in
-- epoch seconds). It stays NULL for a job that never failed (a success
-- writes nothing more) and goes with its row. The view reads it as rows,
-- oldest first (n):
--   SELECT * FROM jobrunner.job_attempts WHERE job_id = 42 ORDER BY n;
ALTER TABLE {{schema}}.jobs ADD COLUMN attempt_log jsonb;
CREATE VIEW {{schema}}.job_attempts AS
SELECT j.id AS job_id, e.n::int AS n, (e.v->>'attempt')::int AS attempt,
       e.v->>'error' AS error, to_timestamp((e.v->>'at')::float8) AS at,
       (e.v->>'duration')::float8 AS duration, e.v->>'runner' AS runner,
       (e.v->>'worker')::int AS worker, e.v->>'generation' AS generation
FROM {{schema}}.jobs j,
     jsonb_array_elements(j.attempt_log) WITH ORDINALITY AS e(v, n)
WHERE j.attempt_log IS NOT NULL;
-- Schedule controls (docs/schedules.md, "Pause, resume, fire now"): a
-- row per schedule an operator paused, resumed or fired by hand. While
-- paused every fire of the schedule is refused (the fire's transaction
-- reads it). fire_at is the instant of the last fire asked for by hand:
-- a runner fires it through the fires table like any fire, once.
CREATE TABLE {{schema}}.schedules (
    name       text        PRIMARY KEY
               CHECK (length(name) BETWEEN 1 AND 128
                      AND name ~ '^[A-Za-z0-9_.:-]+$'),
    paused     boolean     NOT NULL DEFAULT false,
    paused_at  timestamptz,
    fire_at    timestamptz,                     -- fire asked by hand
    updated_at timestamptz NOT NULL DEFAULT now()
);
-- Pauses, resumes and fires a schedule from SQL:
--   SELECT jobrunner.pause_schedule('nightly');
--   SELECT jobrunner.resume_schedule('nightly');
--   SELECT jobrunner.fire_schedule('nightly');
-- A resume records its instant as the schedule's last fire (no job): the
-- fires of the paused time never run, catch-up after a restart included.
-- fire_schedule asks the runners for a fire at the given instant (the
-- current second by default, at most 60 s from now) and returns it; two
-- asks for one instant make one job. A paused schedule is not fired (an
-- exception).
CREATE FUNCTION {{schema}}.pause_schedule(name text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO {{schema}}.schedules AS s (name, paused, paused_at,
                                           updated_at)
    VALUES (pause_schedule.name, true, now(), now())
    ON CONFLICT (name) DO UPDATE
    SET paused = true, paused_at = coalesce(s.paused_at, now()),
        updated_at = now()
$$;
CREATE FUNCTION {{schema}}.resume_schedule(name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {{schema}}.schedules s SET paused = false, paused_at = NULL,
        updated_at = now()
    WHERE s.name = resume_schedule.name AND s.paused;
    IF FOUND THEN
        INSERT INTO {{schema}}.schedule_fires (schedule, fire_at)
        VALUES (resume_schedule.name, now()) ON CONFLICT DO NOTHING;
    END IF;
END
$$;
CREATE FUNCTION {{schema}}.fire_schedule(name text,
                                         at timestamptz DEFAULT NULL)
RETURNS timestamptz LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    t timestamptz := coalesce(fire_schedule.at, date_trunc('second', now()));
BEGIN
    IF abs(extract(epoch FROM t - now())) > 60 THEN
        RAISE EXCEPTION 'jobrunner.fire_schedule: the instant % is more than 60 s from now',
            t USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM {{schema}}.schedules s
               WHERE s.name = fire_schedule.name AND s.paused) THEN
        RAISE EXCEPTION 'jobrunner.fire_schedule: schedule ''%'' is paused',
            fire_schedule.name USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    INSERT INTO {{schema}}.schedules AS s (name, fire_at, updated_at)
    VALUES (fire_schedule.name, t, now())
    ON CONFLICT (name) DO UPDATE
    SET fire_at = greatest(s.fire_at, excluded.fire_at), updated_at = now();
    RETURN t;
END
$$;
-- migration 13
-- One trigger for a job's end instead of three. PostgreSQL fetches the
-- old row and tests the WHEN of every AFTER row trigger on each row an
-- UPDATE or DELETE touches: a claim paid for two, a success's DELETE for
-- one, in every statement of a plain drain. jobs_end, deferred to the
-- commit (a NOTIFY is sent at commit anyway), sends the finished NOTIFY
-- of migration 10 and settles the workflow of a job with a flow bit as
-- jobs_flow did. A runner records the success of a job with a flow bit
-- as an update to completed (pruned at the next prune unless kept), not
-- a delete, so no DELETE trigger is needed: a plain success runs no
-- trigger code. Plain SQL ends a job by setting its state; deleting the
-- row of a running job with a flow bit settles nothing.
-- Indexes likewise: a claim's new row version goes into every index whose
-- predicate it meets, each predicate tested: the kept jobs' index names
-- keep_until alone (set only when a job is kept), and the indexes of
-- waiting jobs and of batch members, which no query needed, are gone.
DROP INDEX IF EXISTS {{schema}}.jobs_kept;
DROP INDEX IF EXISTS {{schema}}.jobs_waiting;
DROP INDEX IF EXISTS {{schema}}.jobs_batch;
CREATE INDEX jobs_kept ON {{schema}}.jobs (keep_until)
    WHERE keep_until IS NOT NULL;
DROP TRIGGER IF EXISTS jobs_finished ON {{schema}}.jobs;
DROP TRIGGER IF EXISTS jobs_flow_end ON {{schema}}.jobs;
DROP TRIGGER IF EXISTS jobs_flow_gone ON {{schema}}.jobs;
DROP FUNCTION IF EXISTS {{schema}}.jobs_notify_finished();
DROP FUNCTION IF EXISTS {{schema}}.jobs_flow();
CREATE FUNCTION {{schema}}.jobs_end() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(left(TG_TABLE_SCHEMA || '_finished', 63),
                      NEW.id || ' ' || NEW.state);
    IF OLD.flow <> 0 AND OLD.state IN ('queued', 'running', 'waiting')
       AND current_setting('jobrunner.settling', true)
           IS DISTINCT FROM 'on' THEN
        PERFORM {{schema}}.flow_settle(NEW.id, NEW.state, NEW.result);
    END IF;
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER jobs_end AFTER UPDATE OF state
    ON {{schema}}.jobs DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.state IN ('completed', 'dead', 'cancelled')
        AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION {{schema}}.jobs_end();
-- migration 14
-- The jobs with a unique key by it: a dead job retried looks up who else
-- holds its key here (admin.c's RETRY_KEY), where it read the table once
-- per job a bulk retry requeued. A job without a key is never in it.
CREATE INDEX jobs_key ON {{schema}}.jobs (name, unique_key)
    WHERE unique_key IS NOT NULL;
-- flow_edge as migration 11's, and a child made dead by a failed parent
-- gets job.parents too (the parents that had ended), for when it is
-- retried (dead retry); a queued one still gets all of them.
CREATE OR REPLACE FUNCTION {{schema}}.flow_edge(child bigint, parent bigint,
                                                pst text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    fail text;
    ns text;
BEGIN
    SELECT CASE WHEN pst = 'completed' THEN NULL
                ELSE coalesce(j.on_parent_failure, 'cancel') END
    INTO fail FROM {{schema}}.jobs j WHERE j.id = child;
    IF fail = 'run' THEN
        fail := NULL;
    END IF;
    UPDATE {{schema}}.jobs j SET parents_left = j.parents_left - 1,
        state = CASE WHEN fail = 'cancel' THEN 'cancelled'
                     WHEN fail = 'dead' THEN 'dead'
                     WHEN j.parents_left <= 1 THEN 'queued'
                     ELSE 'waiting' END,
        finished_at = CASE WHEN fail IS NOT NULL THEN now() END,
        died_at = CASE WHEN fail = 'dead' THEN now() END,
        last_error = CASE WHEN fail IS NOT NULL
                     THEN 'parent ' || parent || ' ended ' || pst
                     ELSE j.last_error END,
        updated_at = now()
    WHERE j.id = child AND j.state = 'waiting'
    RETURNING j.state INTO ns;
    IF ns IN ('queued', 'dead') THEN
        UPDATE {{schema}}.jobs j SET parents = (
            SELECT jsonb_object_agg(d.parent_id::text,
                jsonb_build_object('state', d.parent_state)
                || CASE WHEN d.parent_result IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('result', d.parent_result) END)
            FROM {{schema}}.job_deps d
            WHERE d.child_id = child AND d.parent_state IS NOT NULL)
        WHERE j.id = child;
    END IF;
    RETURN ns;
END
$$;
-- link() as migration 11's, and a parent that waits for the job, however
-- far down, is refused: the two would wait for each other for ever. The
-- walk goes down the job's unsettled edges (a job just pushed has none).
CREATE OR REPLACE FUNCTION {{schema}}.link(id bigint, after bigint[],
                                           on_parent_failure text DEFAULT NULL,
                                           batch bigint DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    child bigint := link.id;
    p bigint;
    pst text;
    pres jsonb;
    n int;
BEGIN
    IF link.on_parent_failure NOT IN ('cancel', 'run', 'dead') THEN
        RAISE EXCEPTION 'jobrunner.link: on_parent_failure ''%'' is not cancel, run or dead',
            link.on_parent_failure USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF link.batch IS NOT NULL THEN
        UPDATE {{schema}}.batches b SET total = b.total + 1,
            pending = b.pending + 1
        WHERE b.id = link.batch AND b.finished_at IS NULL;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'jobrunner.link: job %: batch % %', child,
                link.batch, CASE WHEN EXISTS (SELECT 1 FROM {{schema}}.batches b
                    WHERE b.id = link.batch) THEN 'is finished'
                    ELSE 'does not exist' END
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        INSERT INTO {{schema}}.batch_jobs (batch_id, job_id)
        VALUES (link.batch, child);
        UPDATE {{schema}}.jobs j SET batch_id = link.batch,
            flow = j.flow | 2 WHERE j.id = child;
    END IF;
    SELECT count(DISTINCT a) INTO n FROM unnest(link.after) a;
    IF n = 0 THEN
        RETURN child;
    END IF;
    UPDATE {{schema}}.jobs j SET state = 'waiting', parents_left = n,
        on_parent_failure = link.on_parent_failure
    WHERE j.id = child AND j.state = 'queued';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobrunner.link: job % is not a queued job', child
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM {{schema}}.job_deps d
               WHERE d.parent_id = child AND d.parent_state IS NULL) THEN
        WITH RECURSIVE down(id) AS (
            SELECT d.child_id FROM {{schema}}.job_deps d
            WHERE d.parent_id = child AND d.parent_state IS NULL
            UNION
            SELECT d.child_id FROM {{schema}}.job_deps d JOIN down
                ON d.parent_id = down.id WHERE d.parent_state IS NULL)
        SELECT min(down.id) INTO p FROM down
        WHERE down.id = ANY(link.after);
        IF p IS NOT NULL THEN
            RAISE EXCEPTION 'jobrunner.link: job % cannot wait for job %, which waits for it (a cycle)',
                child, p USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    FOR p IN SELECT DISTINCT a FROM unnest(link.after) a ORDER BY 1 LOOP
        IF p = child THEN
            RAISE EXCEPTION 'jobrunner.link: job % cannot wait for itself',
                child USING ERRCODE = 'invalid_parameter_value';
        END IF;
        UPDATE {{schema}}.jobs j SET flow = j.flow | 1 WHERE j.id = p
        RETURNING j.state, j.result INTO pst, pres;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'jobrunner.link: job %: unknown parent id %',
                child, p USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF pst NOT IN ('completed', 'dead', 'cancelled') THEN
            pst := NULL;
            pres := NULL;
        END IF;
        INSERT INTO {{schema}}.job_deps (parent_id, child_id, parent_state,
                                         parent_result)
        VALUES (p, child, pst, pres);
        IF pst IS NOT NULL THEN
            PERFORM {{schema}}.flow_edge(child, p, pst);
        END IF;
    END LOOP;
    RETURN child;
END
$$;
-- migration 15
-- A job's steps (docs/handlers.md, "Steps and cursors"): the records of
-- jobrunner.step and jobrunner.checkpoint, a JSON array in the order the
-- steps ran, each {"name", "value" (once the step returned) or "cursor"
-- (its last checkpoint), "at", "secs", "attempt"}. NULL for a job that
-- records none: the claim returns it with its row, and a plain job pays
-- a null. Set only by the runner that holds the job (and by rerun).
ALTER TABLE {{schema}}.jobs ADD COLUMN steps jsonb;
-- migration 16
-- Signals and durable sleep (docs/handlers.md, "Signals and durable
-- sleep"). waits is the job's record of them, NULL for a job that never
-- waited nor was signalled, read by the claim with the job: {"signals":
-- {name: {"payload", "at"}}, "timeouts": {name: deadline}, "deadlines":
-- {name: deadline}, "sleeps": {"1": wake, ...}}. A waiting job (state
-- 'waiting', as a flow's child waiting for its parents) waits for the
-- signal wait_on, or for the date wake_at (a sleep, or a signal's
-- deadline).
ALTER TABLE {{schema}}.jobs ADD COLUMN waits jsonb,
    ADD COLUMN wait_on text, ADD COLUMN wake_at timestamptz;
CREATE INDEX jobs_wake ON {{schema}}.jobs (wake_at)
    WHERE wake_at IS NOT NULL;
CREATE INDEX jobs_wait_on ON {{schema}}.jobs (wait_on)
    WHERE wait_on IS NOT NULL;
-- signal(job_id, signal_name, payload): sends the signal. Kept in the
-- job's waits for its wait_signal(signal_name); a job waiting for it now
-- is made ready (queued, due now) in the same transaction. Returns
-- 'ready' when it made the job ready, else the job's state (the signal
-- kept). Refused, nothing changed, for no such job (SQLSTATE P0002), a
-- finished job, a signal of that name sent already or one whose wait
-- timed out (22023). The row is locked first: a wake-up that timed the
-- wait out before is seen, and one after sees the signal.
--   SELECT jobrunner.signal(42, 'approved', '{"by":"ada"}');
CREATE OR REPLACE FUNCTION {{schema}}.signal(job_id bigint,
        signal_name text, payload jsonb DEFAULT '{}') RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    st text;
    won text;
    w jsonb;
    woken boolean;
BEGIN
    IF signal_name IS NULL OR signal_name !~ '^[A-Za-z0-9_.:-]{1,128}$' THEN
        RAISE EXCEPTION 'jobrunner.signal: signal name ''%'' must be 1 to 128 characters of A-Z a-z 0-9 _ . : -',
            signal_name USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT j.state, j.wait_on, j.waits INTO st, won, w
    FROM {{schema}}.jobs j WHERE j.id = job_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobrunner.signal: signal ''%'' to job % refused: no such job',
            signal_name, job_id USING ERRCODE = 'no_data_found';
    ELSIF st NOT IN ('queued', 'running', 'waiting') THEN
        RAISE EXCEPTION 'jobrunner.signal: signal ''%'' to job % refused: the job is % (finished)',
            signal_name, job_id, st USING ERRCODE = 'invalid_parameter_value';
    ELSIF coalesce(w->'timeouts' ? signal_name, false) THEN
        RAISE EXCEPTION 'jobrunner.signal: signal ''%'' to job % refused: its wait for it timed out',
            signal_name, job_id USING ERRCODE = 'invalid_parameter_value';
    ELSIF coalesce(w->'signals' ? signal_name, false) THEN
        RAISE EXCEPTION 'jobrunner.signal: signal ''%'' to job % refused: it was sent already (a signal is delivered once)',
            signal_name, job_id USING ERRCODE = 'invalid_parameter_value';
    END IF;
    woken := st = 'waiting' AND won IS NOT DISTINCT FROM signal_name;
    UPDATE {{schema}}.jobs j SET
        waits = jsonb_set(coalesce(j.waits, '{}'), '{signals}',
            coalesce(j.waits->'signals', '{}') || jsonb_build_object(
                signal_name, jsonb_build_object('payload',
                    coalesce(signal.payload, '{}'),
                    'at', extract(epoch FROM now())::float8))),
        state = CASE WHEN woken THEN 'queued' ELSE j.state END,
        run_at = CASE WHEN woken THEN now() ELSE j.run_at END,
        wake_at = CASE WHEN woken THEN NULL ELSE j.wake_at END,
        wait_on = CASE WHEN woken THEN NULL ELSE j.wait_on END,
        -- a waiting job holds no unique key: another job took it, it
        -- runs on as a plain job (as a dead job retried does)
        unique_key = CASE WHEN woken AND EXISTS (SELECT 1
            FROM {{schema}}.jobs o WHERE o.name = j.name
            AND o.unique_key = j.unique_key
            AND o.state IN ('queued', 'running'))
            THEN NULL ELSE j.unique_key END,
        updated_at = now()
    WHERE j.id = job_id;
    RETURN CASE WHEN woken THEN 'ready' ELSE st END;
END
$$;
-- migration 17
-- How many jobrunner.sql statements a job's success committed, for show
-- and the API: set only on a success that carried some and stays
-- completed; NULL for every other job, which pays nothing for it (a
-- nullable column without a default: no table rewrite).
ALTER TABLE {{schema}}.jobs ADD COLUMN sql_statements integer;
-- migration 18
-- Sequences (docs/queues.md, "Sequences"): the jobs of one sequence key
-- run one at a time, in the order they were pushed. A job pushed into a
-- sequence waits (a dependency of migration 11) for the job pushed into
-- it just before, while that one has not ended, so the claim is the
-- plain one and a plain job pays nothing: these columns stay NULL.
-- sequence_key is the key; seq_no its place, taken under a lock per key
-- by sequence(); seq_fail what the job ending dead does to the jobs
-- behind it: block (they wait for an operator), skip (the next runs),
-- dead (they end dead too).
ALTER TABLE {{schema}}.jobs
    ADD COLUMN sequence_key text
        CHECK (sequence_key IS NULL OR octet_length(sequence_key)
               BETWEEN 1 AND 256),
    ADD COLUMN seq_no bigint,
    ADD COLUMN seq_fail text CHECK (seq_fail IN ('block', 'skip', 'dead'));
CREATE INDEX jobs_sequence ON {{schema}}.jobs (sequence_key, seq_no)
    WHERE sequence_key IS NOT NULL;
-- flow_edge as migration 14's, and a job of a sequence whose parent (the
-- job before it) ended dead with seq_fail block stays waiting: its edge
-- goes back to unsettled, so the parent retried (dead retry, unblock)
-- and ending again reaches it again; skip settles it by hand. A job of a
-- sequence whose parent was cancelled while it still waited for the job
-- before it waits for that one instead: a cancel in the middle of a
-- sequence lets no job past one that runs.
CREATE OR REPLACE FUNCTION {{schema}}.flow_edge(child bigint, parent bigint,
                                                pst text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    fail text;
    ns text;
    gp bigint;
BEGIN
    IF pst = 'cancelled' AND EXISTS (SELECT 1 FROM {{schema}}.jobs j
            WHERE j.id = child AND j.state = 'waiting'
            AND j.sequence_key IS NOT NULL) THEN
        SELECT d.parent_id INTO gp FROM {{schema}}.job_deps d
        WHERE d.child_id = parent AND d.parent_state IS NULL LIMIT 1;
        IF gp IS NOT NULL THEN
            INSERT INTO {{schema}}.job_deps (parent_id, child_id)
            VALUES (gp, child) ON CONFLICT DO NOTHING;
            RETURN 'waiting';
        END IF;
    END IF;
    IF pst = 'dead' AND EXISTS (SELECT 1 FROM {{schema}}.jobs p
            WHERE p.id = parent AND p.seq_fail = 'block')
       AND EXISTS (SELECT 1 FROM {{schema}}.jobs j
            WHERE j.id = child AND j.state = 'waiting'
            AND j.sequence_key IS NOT NULL) THEN
        UPDATE {{schema}}.job_deps d SET parent_state = NULL,
            parent_result = NULL
        WHERE d.parent_id = parent AND d.child_id = child;
        RETURN 'waiting';
    END IF;
    SELECT CASE WHEN pst = 'completed' THEN NULL
                ELSE coalesce(j.on_parent_failure, 'cancel') END
    INTO fail FROM {{schema}}.jobs j WHERE j.id = child;
    IF fail = 'run' THEN
        fail := NULL;
    END IF;
    UPDATE {{schema}}.jobs j SET parents_left = j.parents_left - 1,
        state = CASE WHEN fail = 'cancel' THEN 'cancelled'
                     WHEN fail = 'dead' THEN 'dead'
                     WHEN j.parents_left <= 1 THEN 'queued'
                     ELSE 'waiting' END,
        finished_at = CASE WHEN fail IS NOT NULL THEN now() END,
        died_at = CASE WHEN fail = 'dead' THEN now() END,
        last_error = CASE WHEN fail IS NOT NULL
                     THEN 'parent ' || parent || ' ended ' || pst
                     ELSE j.last_error END,
        updated_at = now()
    WHERE j.id = child AND j.state = 'waiting'
    RETURNING j.state INTO ns;
    IF ns IN ('queued', 'dead') THEN
        UPDATE {{schema}}.jobs j SET parents = (
            SELECT jsonb_object_agg(d.parent_id::text,
                jsonb_build_object('state', d.parent_state)
                || CASE WHEN d.parent_result IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('result', d.parent_result) END)
            FROM {{schema}}.job_deps d
            WHERE d.child_id = child AND d.parent_state IS NOT NULL)
        WHERE j.id = child;
    END IF;
    RETURN ns;
END
$$;
-- Puts the job just pushed (id, queued, in no sequence) at the end of
-- sequence key, in the caller's transaction: it waits for the job pushed
-- into the sequence before it while that one has not ended (or ended
-- dead with seq_fail block). A lock per key, held to the commit, orders
-- the producers of one key. The SQL producer's way:
--   SELECT jobrunner.sequence(jobrunner.push('sync', '{"c": 7}'), 'c7');
CREATE FUNCTION {{schema}}.sequence(id bigint, key text,
                                    on_failure text DEFAULT 'block')
RETURNS bigint LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    child bigint := sequence.id;
    t bigint;
    tst text;
    tfail text;
    n bigint;
    pst text;
    pres jsonb;
BEGIN
    IF sequence.on_failure IS NULL
       OR sequence.on_failure NOT IN ('block', 'skip', 'dead') THEN
        RAISE EXCEPTION 'jobrunner.sequence: on_failure ''%'' is not block, skip or dead',
            sequence.on_failure USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF sequence.key IS NULL OR octet_length(sequence.key) NOT BETWEEN 1 AND 256 THEN
        RAISE EXCEPTION 'jobrunner.sequence: job %: the sequence key must have 1 to 256 bytes',
            child USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(
        '{{schema}}.sequence ' || sequence.key, 0));
    SELECT j.id, j.state, j.seq_fail, j.seq_no INTO t, tst, tfail, n
    FROM {{schema}}.jobs j WHERE j.sequence_key = sequence.key
    ORDER BY j.seq_no DESC LIMIT 1;
    UPDATE {{schema}}.jobs j SET sequence_key = sequence.key,
        seq_no = coalesce(n, 0) + 1, seq_fail = sequence.on_failure
    WHERE j.id = child AND j.state = 'queued' AND j.sequence_key IS NULL
      AND j.parents_left = 0;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobrunner.sequence: job % is not a queued job of no sequence',
            child USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF t IS NULL OR NOT (tst IN ('queued', 'running', 'waiting')
                         OR (tst = 'dead' AND tfail = 'block')) THEN
        RETURN child;
    END IF;
    -- the row lock orders this with the tail's end: a success deleting it
    -- meanwhile leaves nothing to wait for
    UPDATE {{schema}}.jobs j SET flow = j.flow | 1 WHERE j.id = t
    RETURNING j.state, j.result INTO pst, pres;
    IF NOT FOUND THEN
        RETURN child;
    END IF;
    UPDATE {{schema}}.jobs j SET state = 'waiting', parents_left = 1,
        on_parent_failure = CASE WHEN tfail = 'dead' THEN 'dead'
                            ELSE 'run' END
    WHERE j.id = child;
    IF pst NOT IN ('completed', 'dead', 'cancelled') THEN
        pst := NULL;
        pres := NULL;
    END IF;
    INSERT INTO {{schema}}.job_deps (parent_id, child_id, parent_state,
                                     parent_result)
    VALUES (t, child, pst, pres);
    IF pst IS NOT NULL THEN
        PERFORM {{schema}}.flow_edge(child, t, pst);
    END IF;
    RETURN child;
END
$$;
-- Skips the blocked job of sequence key (dead, seq_fail block): it no
-- longer holds the sequence, and the job behind it runs. Returns how many
-- jobs it skipped (0: the sequence was not blocked).
CREATE FUNCTION {{schema}}.sequence_skip(key text) RETURNS int
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    h bigint;
    n int := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(
        '{{schema}}.sequence ' || sequence_skip.key, 0));
    FOR h IN UPDATE {{schema}}.jobs j SET seq_fail = 'skip',
            updated_at = now()
        WHERE j.sequence_key = sequence_skip.key AND j.state = 'dead'
          AND j.seq_fail = 'block' RETURNING j.id
    LOOP
        PERFORM {{schema}}.flow_settle(h, 'dead', NULL);
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;
-- Unblocks sequence key: its blocked job (dead, seq_fail block) is
-- queued again in its place, its attempts reset, as dead retry does.
-- Returns how many jobs it queued (0: the sequence was not blocked).
CREATE FUNCTION {{schema}}.sequence_unblock(key text) RETURNS int
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    n int;
BEGIN
    UPDATE {{schema}}.jobs j SET state = 'queued', attempts = 0,
        run_at = now(), died_at = NULL, finished_at = NULL,
        cancel_requested = false, updated_at = now()
    WHERE j.sequence_key = sequence_unblock.key AND j.state = 'dead'
      AND j.seq_fail = 'block';
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
-- Fair share inside a queue (docs/queues.md, "Fair share"): the weight
-- of a fair key set at run time (`jobrunner fair set`; NULL: the
-- config's) and its pass, what it has started weighted (1/weight a
-- start); the claim starts the key with the lowest pass next. A queue's
-- clock is the lowest pass of its keys with ready jobs: a key below it
-- (idle a while) starts from it. Rows only for fair queues.
CREATE TABLE {{schema}}.fair_keys (
    queue  text NOT NULL,
    key    text NOT NULL,
    weight double precision CHECK (weight BETWEEN 1 AND 1000),
    pass   double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, key)
);
CREATE TABLE {{schema}}.fair_clocks (
    queue text PRIMARY KEY,
    clock double precision NOT NULL
);
-- migration 19
-- Trace context (docs/tracing.md): the W3C traceparent a producer gave,
-- then, with a tracestate, one space and the tracestate. NULL for a job
-- pushed without one, which pays a NULL in the claim and nothing else (a
-- nullable column without a default: no table rewrite).
ALTER TABLE {{schema}}.jobs ADD COLUMN trace text
    CHECK (trace IS NULL OR octet_length(trace) BETWEEN 55 AND 568);
-- The checks every producer makes (base/trace.c): version 00, lowercase
-- hex, ids not all zero; a tracestate printable ASCII of at most 512
-- bytes with key=value, only with a traceparent. Returns the stored form.
CREATE FUNCTION {{schema}}.trace_of(traceparent text, tracestate text)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF traceparent IS NULL THEN
        IF tracestate IS NOT NULL THEN
            RAISE EXCEPTION 'jobrunner.push: a tracestate needs a traceparent'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RETURN NULL;
    END IF;
    IF traceparent !~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
       OR substr(traceparent, 4, 32) = repeat('0', 32)
       OR substr(traceparent, 37, 16) = repeat('0', 16) THEN
        RAISE EXCEPTION 'jobrunner.push: traceparent ''%'' is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, lowercase, ids not all zero)',
            left(traceparent, 80) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF tracestate IS NULL THEN
        RETURN traceparent;
    END IF;
    IF octet_length(tracestate) > 512 OR tracestate !~ '^[ -~]*=[ -~]*$' THEN
        RAISE EXCEPTION 'jobrunner.push: tracestate is not a list of key=value in printable ASCII of at most 512 bytes'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN traceparent || ' ' || tracestate;
END
$$;
-- The SQL producer's push gains the trace context, last, with defaults:
-- the earlier calls keep working.
--   SELECT jobrunner.push('mail', '{}', traceparent =>
--       '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
DROP FUNCTION {{schema}}.push(text, jsonb, timestamptz, int, text, int, text,
                              interval, text, text);
CREATE FUNCTION {{schema}}.push(name text, payload jsonb DEFAULT '{}',
                                run_at timestamptz DEFAULT now(),
                                priority int DEFAULT 0,
                                queue text DEFAULT 'default',
                                max_retries int DEFAULT NULL,
                                unique_key text DEFAULT NULL,
                                unique_for interval DEFAULT NULL,
                                on_conflict text DEFAULT 'keep',
                                key text DEFAULT NULL,
                                traceparent text DEFAULT NULL,
                                tracestate text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    t text := {{schema}}.trace_of(push.traceparent, push.tracestate);
    p_id bigint;
    p_outcome text;
BEGIN
    SELECT p.id, p.outcome INTO p_id, p_outcome
    FROM {{schema}}.push_keyed(push.name, push.payload, push.run_at,
        push.priority, push.queue, push.max_retries, push.unique_key,
        push.unique_for, push.on_conflict, push.key) p;
    IF t IS NOT NULL AND p_outcome = 'new' THEN
        UPDATE {{schema}}.jobs j SET trace = t WHERE j.id = p_id;
    END IF;
    RETURN p_id;
END
$$;
-- migration 20
-- Each attempt's logs (docs/handlers.md, "Each attempt's logs"): what a
-- handler's jobrunner.log, print, io.write and io.stderr wrote in one run,
-- a JSON array of the newest 20 runs (JR_LOGS_KEPT), oldest first, each
-- {"attempt", "at", "lines": [{"at", "level", "msg"}, ...],
-- "dropped_lines", "dropped_bytes"}, appended in the transaction that
-- records the run's end ("at" in epoch seconds). NULL for a job whose
-- handler wrote nothing (a nullable column without a default: no table
-- rewrite). It goes with its row (retention).
ALTER TABLE {{schema}}.jobs ADD COLUMN logs jsonb;
-- migration 21
-- Expiry and deadlines (docs/queues.md, "Expiry and deadlines").
-- expires_at: a job not started by then is never started: the claim
-- passes it over and the runner's sweep ends it in the final state
-- expired (a job that started once, then waits or is retried, is not
-- expired). deadline: seconds from the job's first start; deadline_at,
-- set by its first claim, bounds its retries: a retry due at or past it
-- is not scheduled, the job ends dead with 'deadline passed'. All three
-- stay NULL for a job pushed without them, which pays a NULL test.
ALTER TABLE {{schema}}.jobs
    DROP CONSTRAINT IF EXISTS jobs_state_check,
    ADD CONSTRAINT jobs_state_check CHECK (state IN ('queued', 'running',
        'dead', 'cancelled', 'completed', 'waiting', 'expired')),
    ADD COLUMN expires_at timestamptz
        CHECK (expires_at IS NULL OR isfinite(expires_at)),
    ADD COLUMN deadline double precision
        CHECK (deadline IS NULL OR (deadline > 0 AND deadline <= 3155760000)),
    ADD COLUMN deadline_at timestamptz;
-- the sweep's: queued jobs with an expiry, by it
CREATE INDEX jobs_expiry ON {{schema}}.jobs (expires_at)
    WHERE expires_at IS NOT NULL AND state = 'queued';
-- retention's, as for the other final states
CREATE INDEX jobs_expired ON {{schema}}.jobs (finished_at)
    WHERE state = 'expired';
-- An expired job ends as the other final states do (the jobs_end of
-- the 13th migration): the finished NOTIFY, and its children and batch
-- settled. A child waiting for it ends as its on_parent_failure says, as
-- for a dead parent; a sequence goes on past it (block and skip: the
-- next job runs; dead: the rest ends dead).
DROP TRIGGER IF EXISTS jobs_end ON {{schema}}.jobs;
CREATE CONSTRAINT TRIGGER jobs_end AFTER UPDATE OF state
    ON {{schema}}.jobs DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.state IN ('completed', 'dead', 'cancelled',
                                     'expired')
        AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION {{schema}}.jobs_end();
-- flow_batch as migration 11's, and an expired member counts as dead.
CREATE OR REPLACE FUNCTION {{schema}}.flow_batch(bid bigint, jid bigint,
                                                 st text, res jsonb)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r {{schema}}.batches;
    pay jsonb;
    cid bigint;
    sid bigint;
BEGIN
    UPDATE {{schema}}.batch_jobs m SET state = st, result = res
    WHERE m.batch_id = bid AND m.job_id = jid AND m.state IS NULL;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE {{schema}}.batches b SET pending = b.pending - 1,
        completed = b.completed + (st = 'completed')::int,
        dead = b.dead + (st IN ('dead', 'expired'))::int,
        cancelled = b.cancelled + (st = 'cancelled')::int,
        finished_at = CASE WHEN b.pending <= 1 THEN now() END
    WHERE b.id = bid AND b.finished_at IS NULL
    RETURNING b.* INTO r;
    IF NOT FOUND OR r.pending > 0 THEN
        RETURN;
    END IF;
    pay := jsonb_build_object('batch', r.id,
        'counts', jsonb_build_object('completed', r.completed,
                                     'dead', r.dead,
                                     'cancelled', r.cancelled),
        'members', (SELECT jsonb_agg(m.job_id ORDER BY m.job_id)
                    FROM {{schema}}.batch_jobs m WHERE m.batch_id = bid),
        'payload', r.payload);
    IF r.results THEN
        pay := pay || jsonb_build_object('results', (
            SELECT coalesce(jsonb_object_agg(m.job_id::text, m.result),
                            '{}')
            FROM {{schema}}.batch_jobs m
            WHERE m.batch_id = bid AND m.result IS NOT NULL));
    END IF;
    IF r.on_complete IS NOT NULL THEN
        INSERT INTO {{schema}}.jobs (name, payload, queue)
        VALUES (r.on_complete, pay, r.queue) RETURNING id INTO cid;
    END IF;
    IF r.on_success IS NOT NULL AND r.dead = 0 AND r.cancelled = 0 THEN
        INSERT INTO {{schema}}.jobs (name, payload, queue)
        VALUES (r.on_success, pay, r.queue) RETURNING id INTO sid;
    END IF;
    UPDATE {{schema}}.batches b SET complete_job = cid, success_job = sid
    WHERE b.id = bid;
END
$$;
-- The SQL producer's push as migration 19's (its trace context), and
-- expires_at (a job not started by then ends expired) and deadline (how
-- long after its first start it may still be retried), last, with
-- defaults: the earlier calls keep working:
--   SELECT jobrunner.push('report', expires_at => now() + interval '10 minutes',
--                         deadline => interval '1 hour');
DROP FUNCTION {{schema}}.push(text, jsonb, timestamptz, int, text, int, text,
                              interval, text, text, text, text);
CREATE FUNCTION {{schema}}.push(name text, payload jsonb DEFAULT '{}',
                                run_at timestamptz DEFAULT now(),
                                priority int DEFAULT 0,
                                queue text DEFAULT 'default',
                                max_retries int DEFAULT NULL,
                                unique_key text DEFAULT NULL,
                                unique_for interval DEFAULT NULL,
                                on_conflict text DEFAULT 'keep',
                                key text DEFAULT NULL,
                                traceparent text DEFAULT NULL,
                                tracestate text DEFAULT NULL,
                                expires_at timestamptz DEFAULT NULL,
                                deadline interval DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    t text := {{schema}}.trace_of(push.traceparent, push.tracestate);
    jid bigint;
    oc text;
    secs double precision := extract(epoch FROM push.deadline);
BEGIN
    IF push.expires_at IS NOT NULL AND NOT isfinite(push.expires_at) THEN
        RAISE EXCEPTION 'jobrunner.push: job ''%'': expires_at % is not a time',
            push.name, push.expires_at USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF secs IS NOT NULL AND NOT (secs > 0 AND secs <= 3155760000) THEN
        RAISE EXCEPTION 'jobrunner.push: job ''%'': deadline % is not a duration (more than 0, at most 100 years)',
            push.name, push.deadline USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT p.id, p.outcome INTO jid, oc FROM {{schema}}.push_keyed(
        push.name, push.payload, push.run_at, push.priority, push.queue,
        push.max_retries, push.unique_key, push.unique_for, push.on_conflict,
        push.key) p;
    -- a duplicate's holder keeps its own
    IF oc = 'new' AND (t IS NOT NULL OR push.expires_at IS NOT NULL OR
                       secs IS NOT NULL) THEN
        UPDATE {{schema}}.jobs j SET trace = t,
            expires_at = push.expires_at, deadline = secs
        WHERE j.id = jid;
    END IF;
    RETURN jid;
END
$$;
-- link() as migration 14's, and a parent that expired already has ended:
-- the job waits for it no longer (its edge settled at once).
CREATE OR REPLACE FUNCTION {{schema}}.link(id bigint, after bigint[],
                                           on_parent_failure text DEFAULT NULL,
                                           batch bigint DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    child bigint := link.id;
    p bigint;
    pst text;
    pres jsonb;
    n int;
BEGIN
    IF link.on_parent_failure NOT IN ('cancel', 'run', 'dead') THEN
        RAISE EXCEPTION 'jobrunner.link: on_parent_failure ''%'' is not cancel, run or dead',
            link.on_parent_failure USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF link.batch IS NOT NULL THEN
        UPDATE {{schema}}.batches b SET total = b.total + 1,
            pending = b.pending + 1
        WHERE b.id = link.batch AND b.finished_at IS NULL;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'jobrunner.link: job %: batch % %', child,
                link.batch, CASE WHEN EXISTS (SELECT 1 FROM {{schema}}.batches b
                    WHERE b.id = link.batch) THEN 'is finished'
                    ELSE 'does not exist' END
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        INSERT INTO {{schema}}.batch_jobs (batch_id, job_id)
        VALUES (link.batch, child);
        UPDATE {{schema}}.jobs j SET batch_id = link.batch,
            flow = j.flow | 2 WHERE j.id = child;
    END IF;
    SELECT count(DISTINCT a) INTO n FROM unnest(link.after) a;
    IF n = 0 THEN
        RETURN child;
    END IF;
    UPDATE {{schema}}.jobs j SET state = 'waiting', parents_left = n,
        on_parent_failure = link.on_parent_failure
    WHERE j.id = child AND j.state = 'queued';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobrunner.link: job % is not a queued job', child
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM {{schema}}.job_deps d
               WHERE d.parent_id = child AND d.parent_state IS NULL) THEN
        WITH RECURSIVE down(id) AS (
            SELECT d.child_id FROM {{schema}}.job_deps d
            WHERE d.parent_id = child AND d.parent_state IS NULL
            UNION
            SELECT d.child_id FROM {{schema}}.job_deps d JOIN down
                ON d.parent_id = down.id WHERE d.parent_state IS NULL)
        SELECT min(down.id) INTO p FROM down
        WHERE down.id = ANY(link.after);
        IF p IS NOT NULL THEN
            RAISE EXCEPTION 'jobrunner.link: job % cannot wait for job %, which waits for it (a cycle)',
                child, p USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    FOR p IN SELECT DISTINCT a FROM unnest(link.after) a ORDER BY 1 LOOP
        IF p = child THEN
            RAISE EXCEPTION 'jobrunner.link: job % cannot wait for itself',
                child USING ERRCODE = 'invalid_parameter_value';
        END IF;
        UPDATE {{schema}}.jobs j SET flow = j.flow | 1 WHERE j.id = p
        RETURNING j.state, j.result INTO pst, pres;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'jobrunner.link: job %: unknown parent id %',
                child, p USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF pst NOT IN ('completed', 'dead', 'cancelled', 'expired') THEN
            pst := NULL;
            pres := NULL;
        END IF;
        INSERT INTO {{schema}}.job_deps (parent_id, child_id, parent_state,
                                         parent_result)
        VALUES (p, child, pst, pres);
        IF pst IS NOT NULL THEN
            PERFORM {{schema}}.flow_edge(child, p, pst);
        END IF;
    END LOOP;
    RETURN child;
END
$$;
-- migration 22
-- Schedules managed at run time (docs/schedules.md, "Schedules managed
-- at run time"): one row per schedule added by `jobrunner schedule add`,
-- the library, the Lua module or the HTTP API, beside the config's. def
-- is the schedule's fields as a JSON object, as the config writes them
-- (cron or every, job, payload, queue, overlap, jitter, ...), checked by
-- the config's reader before it is written. schedule_defs_rev counts the
-- changes: each add, set and remove adds one in its transaction (its
-- row lock orders them), and a runner reads the rows again when the
-- count moved.
CREATE TABLE {{schema}}.schedule_defs (
    name       text        PRIMARY KEY
               CHECK (length(name) BETWEEN 1 AND 128
                      AND name ~ '^[A-Za-z0-9_.:-]+$'),
    def        text        NOT NULL
               CHECK (length(def) BETWEEN 2 AND 1048576),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE {{schema}}.schedule_defs_rev (
    one int    PRIMARY KEY CHECK (one = 1),
    rev bigint NOT NULL
);
INSERT INTO {{schema}}.schedule_defs_rev (one, rev) VALUES (1, 0);
-- A fire pushed by `schedule backfill` (true): kept when the newest
-- fires are pruned, so that a second backfill of the window pushes
-- nothing.
ALTER TABLE {{schema}}.schedule_fires ADD COLUMN backfill boolean;
-- migration 23
-- Newer replaces older (docs/queues.md, "Newer replaces older"):
-- on_conflict 'cancel_running' for unique keys and sequences. push_keyed
-- is migration 6's with one step first: a running job of the name and
-- unique key is cancelled (cancel(), a cancel request) and gives up its
-- key and its window, then the push goes on as 'replace' and says
-- 'superseded' when it inserted its job in the cancelled one's place.
-- The running row's lock orders two such pushes: the second sees the
-- first's job and replaces it.
CREATE OR REPLACE FUNCTION {{schema}}.push_keyed(name text,
                                      payload jsonb DEFAULT '{}',
                                      run_at timestamptz DEFAULT now(),
                                      priority int DEFAULT 0,
                                      queue text DEFAULT 'default',
                                      max_retries int DEFAULT NULL,
                                      unique_key text DEFAULT NULL,
                                      unique_for interval DEFAULT NULL,
                                      on_conflict text DEFAULT 'keep',
                                      key text DEFAULT NULL,
                                      OUT id bigint, OUT outcome text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    k text;
    oc text := push_keyed.on_conflict;
    gone bigint;
    cancelled boolean := false;
BEGIN
    IF oc = 'cancel_running' THEN
        IF push_keyed.unique_key IS NULL THEN
            RAISE EXCEPTION 'jobrunner.push: unique_for and on_conflict need a unique_key'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR gone IN UPDATE {{schema}}.jobs j SET unique_key = NULL
            WHERE j.name = push_keyed.name
              AND j.unique_key = push_keyed.unique_key
              AND j.state = 'running'
            RETURNING j.id
        LOOP
            PERFORM {{schema}}.cancel(gone);
            DELETE FROM {{schema}}.unique_keys u
            WHERE u.name = push_keyed.name
              AND u.unique_key = push_keyed.unique_key AND u.job_id = gone;
            cancelled := true;
        END LOOP;
        oc := 'replace';
    END IF;
    SELECT p.id, p.outcome INTO push_keyed.id, push_keyed.outcome
    FROM {{schema}}.push_unique(push_keyed.name, push_keyed.payload,
        push_keyed.run_at, push_keyed.priority, push_keyed.queue,
        push_keyed.max_retries, push_keyed.unique_key, push_keyed.unique_for,
        oc) p;
    IF cancelled AND push_keyed.outcome = 'new' THEN
        push_keyed.outcome := 'superseded';
    END IF;
    IF push_keyed.outcome <> 'duplicate' THEN
        k := {{schema}}.limit_key_of(push_keyed.name,
                                     coalesce(push_keyed.payload, '{}'),
                                     push_keyed.key);
        IF k IS NOT NULL THEN
            UPDATE {{schema}}.jobs j SET limit_key = k
            WHERE j.id = push_keyed.id;
        END IF;
    END IF;
END
$$;
-- sequence_put: migration 18's sequence() with on_conflict. 'replace':
-- when the sequence's last job has not started (queued, a retry's
-- backoff included, or waiting for the job before it), it takes the
-- payload and run_at of the job just pushed, which is deleted; 'replaced'
-- and the last job's id come back. 'cancel_running' cancels the
-- sequence's running job first (cancel()), then does the same; a job put
-- at the end behind a cancelled one says 'superseded'. Else 'new'. The
-- lock per key orders it with the other producers of the key.
CREATE FUNCTION {{schema}}.sequence_put(id bigint, key text,
                                        on_failure text DEFAULT 'block',
                                        on_conflict text DEFAULT 'keep',
                                        OUT job_id bigint,
                                        OUT outcome text)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    child bigint := sequence_put.id;
    t bigint;
    tst text;
    tfail text;
    tleft int;
    n bigint;
    pst text;
    pres jsonb;
    cpay jsonb;
    crun timestamptz;
    gone bigint;
    cancelled boolean := false;
BEGIN
    IF sequence_put.on_failure IS NULL
       OR sequence_put.on_failure NOT IN ('block', 'skip', 'dead') THEN
        RAISE EXCEPTION 'jobrunner.sequence: on_failure ''%'' is not block, skip or dead',
            sequence_put.on_failure USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF sequence_put.on_conflict IS NULL OR sequence_put.on_conflict
       NOT IN ('keep', 'replace', 'cancel_running') THEN
        RAISE EXCEPTION 'jobrunner.sequence: on_conflict ''%'' is not keep, replace or cancel_running',
            sequence_put.on_conflict USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF sequence_put.key IS NULL OR octet_length(sequence_put.key) NOT BETWEEN 1 AND 256 THEN
        RAISE EXCEPTION 'jobrunner.sequence: job %: the sequence key must have 1 to 256 bytes',
            child USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(
        '{{schema}}.sequence ' || sequence_put.key, 0));
    SELECT j.id, j.state, j.seq_fail, j.seq_no, j.parents_left
    INTO t, tst, tfail, n, tleft
    FROM {{schema}}.jobs j WHERE j.sequence_key = sequence_put.key
    ORDER BY j.seq_no DESC LIMIT 1;
    SELECT j.payload, j.run_at INTO cpay, crun FROM {{schema}}.jobs j
    WHERE j.id = child AND j.state = 'queued' AND j.sequence_key IS NULL
      AND j.parents_left = 0;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobrunner.sequence: job % is not a queued job of no sequence',
            child USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF sequence_put.on_conflict = 'cancel_running' THEN
        FOR gone IN SELECT j.id FROM {{schema}}.jobs j
            WHERE j.sequence_key = sequence_put.key AND j.state = 'running'
        LOOP
            PERFORM {{schema}}.cancel(gone);
            cancelled := true;
        END LOOP;
    END IF;
    IF sequence_put.on_conflict <> 'keep' AND t IS NOT NULL
       AND (tst = 'queued' OR (tst = 'waiting' AND tleft > 0)) THEN
        -- a claim holding the row makes this wait, then find it running
        UPDATE {{schema}}.jobs j SET payload = cpay, run_at = crun,
            updated_at = now()
        WHERE j.id = t AND (j.state = 'queued'
                            OR (j.state = 'waiting' AND j.parents_left > 0));
        IF FOUND THEN
            DELETE FROM {{schema}}.jobs j WHERE j.id = child;
            job_id := t;
            outcome := 'replaced';
            RETURN;
        END IF;
    END IF;
    job_id := child;
    outcome := CASE WHEN cancelled THEN 'superseded' ELSE 'new' END;
    UPDATE {{schema}}.jobs j SET sequence_key = sequence_put.key,
        seq_no = coalesce(n, 0) + 1, seq_fail = sequence_put.on_failure
    WHERE j.id = child AND j.state = 'queued' AND j.sequence_key IS NULL
      AND j.parents_left = 0;
    IF t IS NULL OR NOT (tst IN ('queued', 'running', 'waiting')
                         OR (tst = 'dead' AND tfail = 'block')) THEN
        RETURN;
    END IF;
    -- the row lock orders this with the tail's end: a success deleting it
    -- meanwhile leaves nothing to wait for
    UPDATE {{schema}}.jobs j SET flow = j.flow | 1 WHERE j.id = t
    RETURNING j.state, j.result INTO pst, pres;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE {{schema}}.jobs j SET state = 'waiting', parents_left = 1,
        on_parent_failure = CASE WHEN tfail = 'dead' THEN 'dead'
                            ELSE 'run' END
    WHERE j.id = child;
    IF pst NOT IN ('completed', 'dead', 'cancelled') THEN
        pst := NULL;
        pres := NULL;
    END IF;
    INSERT INTO {{schema}}.job_deps (parent_id, child_id, parent_state,
                                     parent_result)
    VALUES (t, child, pst, pres);
    IF pst IS NOT NULL THEN
        PERFORM {{schema}}.flow_edge(child, t, pst);
    END IF;
END
$$;
-- The SQL producer's sequence(): migration 18's with on_conflict, a
-- parameter at the end; it returns the id of the job that holds the
-- push (the last job's when it took the payload).
--   SELECT jobrunner.sequence(jobrunner.push('sync', '{"c": 7}'), 'c7',
--                             on_conflict => 'replace');
DROP FUNCTION {{schema}}.sequence(bigint, text, text);
CREATE FUNCTION {{schema}}.sequence(id bigint, key text,
                                    on_failure text DEFAULT 'block',
                                    on_conflict text DEFAULT 'keep')
RETURNS bigint LANGUAGE sql AS $$
    SELECT s.job_id FROM {{schema}}.sequence_put(sequence.id, sequence.key,
        sequence.on_failure, sequence.on_conflict) s
$$;
-- Limits by cost (docs/limits.md, "Limits by cost"): a job's cost, the
-- tokens it takes from a rate's bucket and the slots of a concurrency
-- cap; NULL for a job pushed without one, which counts 1 and pays
-- nothing for it (a nullable column without a default: no table
-- rewrite). limit_sizes: per limit of the config (a job name, or
-- "queue:NAME"), the most one job may cost (its smallest cap or
-- bucket) and what that is, written by the runner at start and by
-- migrate, read by a push with a cost: a cost over it is refused.
ALTER TABLE {{schema}}.jobs ADD COLUMN cost int
    CHECK (cost IS NULL OR cost BETWEEN 1 AND 1000000000);
CREATE TABLE {{schema}}.limit_sizes (
    scope text PRIMARY KEY,
    size  bigint NOT NULL,
    what  text NOT NULL
);
-- migration 24
-- Encrypted payloads stored as bytes (docs/operations.md, "Encryption"):
-- a payload sealed before its push, {"$jr_enc":"v1:ID:BASE64"}, is
-- stored as the stub {"$jr_enc":"v1:ID:sealed"} with the envelope's
-- bytes (BASE64 decoded) in sealed, a quarter smaller than the text in
-- the row that a claim and an end rewrite. The stub and its bytes read as
-- the envelope again; sealed is NULL for any other payload, and read
-- only beside a stub (a payload written since by other means leaves it
-- unread). Envelopes stored as text before stay, and read as before.
ALTER TABLE {{schema}}.jobs ADD COLUMN sealed bytea;
-- migration 25
-- Fair share inside a queue (docs/queues.md, "Fair share"): a job's
-- fair key, stamped when it is pushed into a queue listed in fair_paths
-- (written from the config by the runner at start and by migrate, with
-- the key's path), so that a claim reaches each key's first ready jobs
-- through jobs_fair and walks the keys with ready jobs from the queue's
-- cursor (fair_clocks.cursor), the last key it started: keys without
-- queued jobs are in no index and cost nothing. A job of a queue that is
-- not fair keeps a NULL key, in no index (a nullable column without a
-- default: no table rewrite); an insert statement pays a look at
-- fair_paths (empty without fair queues) in jobs_queue_known.
ALTER TABLE {{schema}}.jobs ADD COLUMN fair_key text COLLATE "C";
CREATE INDEX jobs_fair ON {{schema}}.jobs (queue, fair_key, priority, run_at, id)
    WHERE state = 'queued' AND fair_key IS NOT NULL;
CREATE TABLE {{schema}}.fair_paths (
    queue text PRIMARY KEY,
    path  text[] NOT NULL
);
ALTER TABLE {{schema}}.fair_clocks ADD COLUMN cursor text COLLATE "C";
-- The key is stamped by jobs_queue_known, which every insert statement
-- runs already (redefined here: a trigger of its own cost a plain
-- single push a function call more).
CREATE OR REPLACE FUNCTION {{schema}}.jobs_queue_known() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {{schema}}.queues (name)
    SELECT DISTINCT n.queue FROM new_jobs n
    WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.queues q
                      WHERE q.name = n.queue)
    ON CONFLICT DO NOTHING;
    IF EXISTS (SELECT 1 FROM {{schema}}.fair_paths) THEN
        UPDATE {{schema}}.jobs j
        SET fair_key = coalesce(n.payload #>> f.path, '')
        FROM new_jobs n JOIN {{schema}}.fair_paths f ON f.queue = n.queue
        WHERE j.id = n.id AND n.fair_key IS NULL;
    END IF;
    RETURN NULL;
END
$$;
-- migration 26
-- Sequence as a handler option (docs/queues.md, "Sequences"): per job
-- name whose handler returns `sequence = "payload.PATH"`, PATH ("a.b"),
-- written by each runner from its handlers when it loads them, read by
-- the library's pushes: a job of the name pushed without a sequence (nor
-- after, a batch or a unique key) goes into the sequence its payload's
-- value at PATH names. A name whose handler has none has no row. The SQL
-- producer's push() does not read it: it puts a job in a sequence with
-- sequence().
CREATE TABLE {{schema}}.sequence_paths (
    name text PRIMARY KEY,
    path text NOT NULL CHECK (octet_length(path) BETWEEN 1 AND 192)
);
-- migration 30
-- flow_batch as migration 21's, and the callbacks carry the trace context
-- of the member whose end finished the batch (docs/tracing.md), so they
-- join its trace.
CREATE OR REPLACE FUNCTION {{schema}}.flow_batch(bid bigint, jid bigint,
                                                 st text, res jsonb)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r {{schema}}.batches;
    pay jsonb;
    cid bigint;
    sid bigint;
    tr text;
BEGIN
    UPDATE {{schema}}.batch_jobs m SET state = st, result = res
    WHERE m.batch_id = bid AND m.job_id = jid AND m.state IS NULL;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE {{schema}}.batches b SET pending = b.pending - 1,
        completed = b.completed + (st = 'completed')::int,
        dead = b.dead + (st IN ('dead', 'expired'))::int,
        cancelled = b.cancelled + (st = 'cancelled')::int,
        finished_at = CASE WHEN b.pending <= 1 THEN now() END
    WHERE b.id = bid AND b.finished_at IS NULL
    RETURNING b.* INTO r;
    IF NOT FOUND OR r.pending > 0 THEN
        RETURN;
    END IF;
    pay := jsonb_build_object('batch', r.id,
        'counts', jsonb_build_object('completed', r.completed,
                                     'dead', r.dead,
                                     'cancelled', r.cancelled),
        'members', (SELECT jsonb_agg(m.job_id ORDER BY m.job_id)
                    FROM {{schema}}.batch_jobs m WHERE m.batch_id = bid),
        'payload', r.payload);
    IF r.results THEN
        pay := pay || jsonb_build_object('results', (
            SELECT coalesce(jsonb_object_agg(m.job_id::text, m.result),
                            '{}')
            FROM {{schema}}.batch_jobs m
            WHERE m.batch_id = bid AND m.result IS NOT NULL));
    END IF;
    SELECT j.trace INTO tr FROM {{schema}}.jobs j WHERE j.id = jid;
    IF r.on_complete IS NOT NULL THEN
        INSERT INTO {{schema}}.jobs (name, payload, queue, trace)
        VALUES (r.on_complete, pay, r.queue, tr) RETURNING id INTO cid;
    END IF;
    IF r.on_success IS NOT NULL AND r.dead = 0 AND r.cancelled = 0 THEN
        INSERT INTO {{schema}}.jobs (name, payload, queue, trace)
        VALUES (r.on_success, pay, r.queue, tr) RETURNING id INTO sid;
    END IF;
    UPDATE {{schema}}.batches b SET complete_job = cid, success_job = sid
    WHERE b.id = bid;
END
$$;
-- migration 31
-- Room in job_deps' pages for the one update of each edge, its parent's
-- end (parent_state), so that it stays in its page and adds no entries to
-- the edge's two indexes (a HOT update): the readying of a sequence's
-- next job and of a workflow's children writes half as much. New pages
-- only; a VACUUM FULL of the table applies it to the old ones.
ALTER TABLE {{schema}}.job_deps SET (fillfactor = 50);
-- migration 32
-- Fair share keyed by a job name (docs/queues.md, "Fair share"): per job
-- name whose handler returns `fair = "payload.PATH"`, its path, written
-- by each runner from its handlers when it loads them. A job of the name
-- pushed into a fair queue takes its key at that path, over the queue's
-- (jobs_queue_known, redefined here, reads it), from every producer. A
-- name whose handler has none has no row; an insert statement into a
-- queue that is not fair pays nothing more (fair_paths is looked at
-- first, as before).
CREATE TABLE {{schema}}.fair_names (
    name text PRIMARY KEY,
    path text[] NOT NULL
);
CREATE OR REPLACE FUNCTION {{schema}}.jobs_queue_known() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {{schema}}.queues (name)
    SELECT DISTINCT n.queue FROM new_jobs n
    WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.queues q
                      WHERE q.name = n.queue)
    ON CONFLICT DO NOTHING;
    IF EXISTS (SELECT 1 FROM {{schema}}.fair_paths) THEN
        UPDATE {{schema}}.jobs j
        SET fair_key = coalesce(n.payload #>> coalesce(fn.path, f.path), '')
        FROM new_jobs n JOIN {{schema}}.fair_paths f ON f.queue = n.queue
        LEFT JOIN {{schema}}.fair_names fn ON fn.name = n.name
        WHERE j.id = n.id AND n.fair_key IS NULL;
    END IF;
    RETURN NULL;
END
$$;
-- migration 33
-- Fair share by start tags (docs/queues.md, "Fair share"): each queued
-- job of a fair queue has a tag, max(its key's finish, the queue's
-- clock) when it was given, and its key's finish (fair_keys.pass) moves
-- on by 1/weight; the claim takes a fair queue's jobs in (priority, tag,
-- id) order through jobs_fairtag, one range scan, and moves the clock
-- (fair_clocks.clock) to the tags it took. An insert statement into a
-- fair queue tags its queued jobs in jobs_queue_known (redefined here),
-- each key's finish moved by one upsert (its row locked to the insert's
-- commit, keys in order: concurrent pushes of a key take turns); a job
-- pushed waiting, or claimed and back to queued (a retry, a rerun, a
-- readied flow child), has no tag until the next claim of its queue
-- gives it one (jobs_fairnew). fair_keys.cweight is the weight the config
-- gives the key, fair_paths.weights and wdefault the config's weights
-- and default as a runner last recorded them; jobs.fair_w the weight
-- the job was tagged with (the runner deals its local queue by it). The
-- walk's jobs_fair goes (the cursor stays, unused).
ALTER TABLE {{schema}}.jobs ADD COLUMN fair_tag double precision,
    ADD COLUMN fair_w double precision;
ALTER TABLE {{schema}}.fair_keys ADD COLUMN cweight double precision;
ALTER TABLE {{schema}}.fair_paths ADD COLUMN weights jsonb,
    ADD COLUMN wdefault double precision;
DROP INDEX {{schema}}.jobs_fair;
CREATE INDEX jobs_fairtag ON {{schema}}.jobs (queue, priority, fair_tag, id)
    WHERE state = 'queued' AND fair_tag IS NOT NULL;
CREATE INDEX jobs_fairnew ON {{schema}}.jobs (queue, id)
    WHERE state = 'queued' AND fair_key IS NOT NULL AND fair_tag IS NULL;
CREATE OR REPLACE FUNCTION {{schema}}.jobs_queue_known() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {{schema}}.queues (name)
    SELECT DISTINCT n.queue FROM new_jobs n
    WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.queues q
                      WHERE q.name = n.queue)
    ON CONFLICT DO NOTHING;
    IF EXISTS (SELECT 1 FROM {{schema}}.fair_paths) THEN
        -- the finishes of the keys of the queued jobs, one upsert a key
        INSERT INTO {{schema}}.fair_keys AS k (queue, key, pass)
        SELECT c.queue, c.key, coalesce(fc.clock, 0) + c.cnt
               / coalesce(fk.weight, fk.cweight, fp.wdefault, 1)
        FROM (SELECT n.queue, coalesce(n.payload #>> coalesce(fn.path,
                     f.path), '') AS key, count(*) AS cnt
              FROM new_jobs n
              JOIN {{schema}}.fair_paths f ON f.queue = n.queue
              LEFT JOIN {{schema}}.fair_names fn ON fn.name = n.name
              WHERE n.fair_key IS NULL AND n.state = 'queued'
              GROUP BY 1, 2) c
        LEFT JOIN {{schema}}.fair_keys fk
               ON fk.queue = c.queue AND fk.key = c.key
        LEFT JOIN {{schema}}.fair_paths fp ON fp.queue = c.queue
        LEFT JOIN {{schema}}.fair_clocks fc ON fc.queue = c.queue
        ORDER BY c.queue, c.key
        ON CONFLICT (queue, key) DO UPDATE SET pass = excluded.pass
            + greatest(k.pass - coalesce((SELECT fc.clock
              FROM {{schema}}.fair_clocks fc
              WHERE fc.queue = excluded.queue), 0), 0);
        -- each job's key, and a queued one's tag: up to its key's finish,
        -- 1/weight apart in id order
        UPDATE {{schema}}.jobs j
        SET fair_key = x.key, (fair_tag, fair_w) = (SELECT
                k.pass - (x.cnt - x.rn + 1) / w.w, w.w
            FROM {{schema}}.fair_keys k
            JOIN {{schema}}.fair_paths p ON p.queue = k.queue
            CROSS JOIN LATERAL (SELECT coalesce(k.weight, k.cweight,
                                                p.wdefault, 1) AS w) w
            WHERE x.state = 'queued' AND k.queue = x.queue
              AND k.key = x.key)
        FROM (SELECT t.*,
                     row_number() OVER (PARTITION BY t.queue, t.key, t.state
                                        ORDER BY t.id) AS rn,
                     count(*) OVER (PARTITION BY t.queue, t.key, t.state)
                         AS cnt
              FROM (SELECT n.id, n.queue, n.state,
                           coalesce(n.payload #>> coalesce(fn.path, f.path),
                                    '') AS key
                    FROM new_jobs n
                    JOIN {{schema}}.fair_paths f ON f.queue = n.queue
                    LEFT JOIN {{schema}}.fair_names fn ON fn.name = n.name
                    WHERE n.fair_key IS NULL) t) x
        WHERE j.id = x.id;
    END IF;
    RETURN NULL;
END
$$;
-- migration 34
-- A job name's own fair share (docs/queues.md, "A name's own weights"):
-- a handler's `fair = { key = "payload.PATH", weights = {...}, default
-- = N }` puts its weights and default beside its path, and its jobs'
-- keys in a scope of their own: NAME, chr(31), the value at PATH, so one
-- name's acme is not another's nor the queue's. Weights set at run time
-- (`jobrunner fair set --name`) go in fair_name_keys, over the
-- handler's. An insert statement with a job of such a name into a queue
-- that is not fair makes the queue fair (a fair_paths row with the path
-- '{}': the other names' jobs have the key '', and take turns as one
-- key) and keys its jobs not ended (jobs_queue_known, redefined here:
-- it tags as in migration 33, with these keys, a key in a name's scope
-- weighed by fair_name_w); without such a name it pays one look-up in
-- fair_names.
ALTER TABLE {{schema}}.fair_names ADD COLUMN weights jsonb,
    ADD COLUMN dflt float8;
CREATE TABLE {{schema}}.fair_name_keys (
    name   text NOT NULL,
    key    text NOT NULL,
    weight float8 NOT NULL CHECK (weight BETWEEN 1 AND 1000),
    PRIMARY KEY (name, key)
);
-- The weight of fair key k when it is in a job name's scope (NAME,
-- chr(31), value) and the name has weights: fair set --name's
-- (fair_name_keys), else its handler's weights', else its default; NULL
-- otherwise (the key's queue's weight then: fair_keys, fair_paths). The
-- tags of an insert statement (jobs_queue_known) and of a claim read it,
-- for keys with a chr(31) only: it is not inlined, a call a row.
CREATE FUNCTION {{schema}}.fair_name_w(k text) RETURNS float8
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN strpos(k, chr(31)) > 1 THEN (SELECT coalesce(
        (SELECT nk.weight FROM {{schema}}.fair_name_keys nk
         WHERE nk.name = n.name
           AND nk.key = substr(k, length(n.name) + 2)),
        (n.weights ->> substr(k, length(n.name) + 2))::float8, n.dflt)
        FROM {{schema}}.fair_names n
        WHERE n.name = split_part(k, chr(31), 1)
          AND n.weights IS NOT NULL) END
$$;
CREATE OR REPLACE FUNCTION {{schema}}.jobs_queue_known() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {{schema}}.queues (name)
    SELECT DISTINCT n.queue FROM new_jobs n
    WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.queues q
                      WHERE q.name = n.queue)
    ON CONFLICT DO NOTHING;
    IF EXISTS (SELECT 1 FROM {{schema}}.fair_names
               WHERE weights IS NOT NULL) THEN
        WITH made AS (
            INSERT INTO {{schema}}.fair_paths (queue, path)
            SELECT DISTINCT n.queue, '{}'::text[] FROM new_jobs n
            JOIN {{schema}}.fair_names fn ON fn.name = n.name
            WHERE fn.weights IS NOT NULL AND n.fair_key IS NULL
            ON CONFLICT DO NOTHING RETURNING queue)
        UPDATE {{schema}}.jobs j SET fair_key = coalesce((SELECT
            CASE WHEN fn.weights IS NOT NULL THEN j.name || chr(31)
            ELSE '' END || coalesce(j.payload #>> fn.path, '')
            FROM {{schema}}.fair_names fn WHERE fn.name = j.name), '')
        FROM made WHERE j.queue = made.queue
        AND j.state IN ('queued', 'running', 'waiting');
    END IF;
    IF EXISTS (SELECT 1 FROM {{schema}}.fair_paths) THEN
        -- the finishes of the keys of the queued jobs, one upsert a key
        INSERT INTO {{schema}}.fair_keys AS k (queue, key, pass)
        SELECT c.queue, c.key, coalesce(fc.clock, 0) + c.cnt
               / coalesce(CASE WHEN strpos(c.key, chr(31)) > 1
                          THEN {{schema}}.fair_name_w(c.key) END,
                          fk.weight, fk.cweight, fp.wdefault, 1)
        -- (a job's key: in its name's scope when the name has weights,
        -- at its name's path, '' in a queue made fair by a name, or at
        -- the queue's path)
        FROM (SELECT n.queue, CASE
                  WHEN fn.weights IS NOT NULL
                  THEN n.name || chr(31) || coalesce(n.payload #>> fn.path, '')
                  WHEN fn.path IS NOT NULL
                  THEN coalesce(n.payload #>> fn.path, '')
                  WHEN cardinality(f.path) = 0 THEN ''
                  ELSE coalesce(n.payload #>> f.path, '') END AS key,
                     count(*) AS cnt
              FROM new_jobs n
              JOIN {{schema}}.fair_paths f ON f.queue = n.queue
              LEFT JOIN {{schema}}.fair_names fn ON fn.name = n.name
              WHERE n.fair_key IS NULL AND n.state = 'queued'
              GROUP BY 1, 2) c
        LEFT JOIN {{schema}}.fair_keys fk
               ON fk.queue = c.queue AND fk.key = c.key
        LEFT JOIN {{schema}}.fair_paths fp ON fp.queue = c.queue
        LEFT JOIN {{schema}}.fair_clocks fc ON fc.queue = c.queue
        ORDER BY c.queue, c.key
        ON CONFLICT (queue, key) DO UPDATE SET pass = excluded.pass
            + greatest(k.pass - coalesce((SELECT fc.clock
              FROM {{schema}}.fair_clocks fc
              WHERE fc.queue = excluded.queue), 0), 0);
        -- each job's key, and a queued one's tag: up to its key's finish,
        -- 1/weight apart in id order
        UPDATE {{schema}}.jobs j
        SET fair_key = x.key, (fair_tag, fair_w) = (SELECT
                k.pass - (x.cnt - x.rn + 1) / w.w, w.w
            FROM {{schema}}.fair_keys k
            JOIN {{schema}}.fair_paths p ON p.queue = k.queue
            CROSS JOIN LATERAL (SELECT coalesce(CASE WHEN
                strpos(k.key, chr(31)) > 1 THEN
                {{schema}}.fair_name_w(k.key) END, k.weight, k.cweight,
                p.wdefault, 1) AS w) w
            WHERE x.state = 'queued' AND k.queue = x.queue
              AND k.key = x.key)
        FROM (SELECT t.*,
                     row_number() OVER (PARTITION BY t.queue, t.key, t.state
                                        ORDER BY t.id) AS rn,
                     count(*) OVER (PARTITION BY t.queue, t.key, t.state)
                         AS cnt
              FROM (SELECT n.id, n.queue, n.state, CASE
                        WHEN fn.weights IS NOT NULL
                        THEN n.name || chr(31)
                             || coalesce(n.payload #>> fn.path, '')
                        WHEN fn.path IS NOT NULL
                        THEN coalesce(n.payload #>> fn.path, '')
                        WHEN cardinality(f.path) = 0 THEN ''
                        ELSE coalesce(n.payload #>> f.path, '') END AS key
                    FROM new_jobs n
                    JOIN {{schema}}.fair_paths f ON f.queue = n.queue
                    LEFT JOIN {{schema}}.fair_names fn ON fn.name = n.name
                    WHERE n.fair_key IS NULL) t) x
        WHERE j.id = x.id;
    END IF;
    RETURN NULL;
END
$$;
-- migration 35
-- sequence_put, as in migration 23, waits for the last job of the
-- sequence that holds it when the job pushed last has ended before the
-- ones ahead of it (cancelled while they were pending): a push after it
-- was queued at once and ran beside them.
CREATE OR REPLACE FUNCTION {{schema}}.sequence_put(id bigint, key text,
                                        on_failure text DEFAULT 'block',
                                        on_conflict text DEFAULT 'keep',
                                        OUT job_id bigint,
                                        OUT outcome text)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    child bigint := sequence_put.id;
    t bigint;
    tst text;
    tfail text;
    tleft int;
    n bigint;
    pst text;
    pres jsonb;
    cpay jsonb;
    crun timestamptz;
    gone bigint;
    cancelled boolean := false;
BEGIN
    IF sequence_put.on_failure IS NULL
       OR sequence_put.on_failure NOT IN ('block', 'skip', 'dead') THEN
        RAISE EXCEPTION 'jobrunner.sequence: on_failure ''%'' is not block, skip or dead',
            sequence_put.on_failure USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF sequence_put.on_conflict IS NULL OR sequence_put.on_conflict
       NOT IN ('keep', 'replace', 'cancel_running') THEN
        RAISE EXCEPTION 'jobrunner.sequence: on_conflict ''%'' is not keep, replace or cancel_running',
            sequence_put.on_conflict USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF sequence_put.key IS NULL OR octet_length(sequence_put.key) NOT BETWEEN 1 AND 256 THEN
        RAISE EXCEPTION 'jobrunner.sequence: job %: the sequence key must have 1 to 256 bytes',
            child USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(
        '{{schema}}.sequence ' || sequence_put.key, 0));
    SELECT j.id, j.state, j.seq_fail, j.seq_no, j.parents_left
    INTO t, tst, tfail, n, tleft
    FROM {{schema}}.jobs j WHERE j.sequence_key = sequence_put.key
    ORDER BY j.seq_no DESC LIMIT 1;
    -- the last one ended (cancelled) while jobs before it may not have:
    -- the last of those that holds the sequence is the one to wait for
    -- (or to replace); n stays the last place, the new job's comes after
    IF t IS NOT NULL AND NOT (tst IN ('queued', 'running', 'waiting')
                              OR (tst = 'dead' AND tfail = 'block')) THEN
        SELECT j.id, j.state, j.seq_fail, j.parents_left
        INTO t, tst, tfail, tleft
        FROM {{schema}}.jobs j WHERE j.sequence_key = sequence_put.key
          AND (j.state IN ('queued', 'running', 'waiting')
               OR (j.state = 'dead' AND j.seq_fail = 'block'))
        ORDER BY j.seq_no DESC LIMIT 1;
    END IF;
    SELECT j.payload, j.run_at INTO cpay, crun FROM {{schema}}.jobs j
    WHERE j.id = child AND j.state = 'queued' AND j.sequence_key IS NULL
      AND j.parents_left = 0;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobrunner.sequence: job % is not a queued job of no sequence',
            child USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF sequence_put.on_conflict = 'cancel_running' THEN
        FOR gone IN SELECT j.id FROM {{schema}}.jobs j
            WHERE j.sequence_key = sequence_put.key AND j.state = 'running'
        LOOP
            PERFORM {{schema}}.cancel(gone);
            cancelled := true;
        END LOOP;
    END IF;
    IF sequence_put.on_conflict <> 'keep' AND t IS NOT NULL
       AND (tst = 'queued' OR (tst = 'waiting' AND tleft > 0)) THEN
        -- a claim holding the row makes this wait, then find it running
        UPDATE {{schema}}.jobs j SET payload = cpay, run_at = crun,
            updated_at = now()
        WHERE j.id = t AND (j.state = 'queued'
                            OR (j.state = 'waiting' AND j.parents_left > 0));
        IF FOUND THEN
            DELETE FROM {{schema}}.jobs j WHERE j.id = child;
            job_id := t;
            outcome := 'replaced';
            RETURN;
        END IF;
    END IF;
    job_id := child;
    outcome := CASE WHEN cancelled THEN 'superseded' ELSE 'new' END;
    UPDATE {{schema}}.jobs j SET sequence_key = sequence_put.key,
        seq_no = coalesce(n, 0) + 1, seq_fail = sequence_put.on_failure
    WHERE j.id = child AND j.state = 'queued' AND j.sequence_key IS NULL
      AND j.parents_left = 0;
    IF t IS NULL OR NOT (tst IN ('queued', 'running', 'waiting')
                         OR (tst = 'dead' AND tfail = 'block')) THEN
        RETURN;
    END IF;
    -- the row lock orders this with the tail's end: a success deleting it
    -- meanwhile leaves nothing to wait for
    UPDATE {{schema}}.jobs j SET flow = j.flow | 1 WHERE j.id = t
    RETURNING j.state, j.result INTO pst, pres;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE {{schema}}.jobs j SET state = 'waiting', parents_left = 1,
        on_parent_failure = CASE WHEN tfail = 'dead' THEN 'dead'
                            ELSE 'run' END
    WHERE j.id = child;
    IF pst NOT IN ('completed', 'dead', 'cancelled') THEN
        pst := NULL;
        pres := NULL;
    END IF;
    INSERT INTO {{schema}}.job_deps (parent_id, child_id, parent_state,
                                     parent_result)
    VALUES (t, child, pst, pres);
    IF pst IS NOT NULL THEN
        PERFORM {{schema}}.flow_edge(child, t, pst);
    END IF;
END
$$;
-- migration 36
-- A batch push into a fair queue tagged in its own insert (push.c's
-- st_push_fair): fair_stamp gives each job of the batch (the arrays'
-- queue, name and payload, all queued) its key, tag and weight, moving
-- each key's finish first as jobs_queue_known does (one upsert a key, in
-- key order); the rows go in with them, and the trigger, which tags only
-- the rows without a key, writes no second version of each (a fair
-- fill's UPDATE doubled the table's dead rows and every index's entries,
-- and the next drain paid for them). A queue a name's weights make fair
-- is made so first, as the trigger does.
CREATE FUNCTION {{schema}}.fair_stamp(a_q text[], a_nm text[], a_pl text[])
RETURNS TABLE (j_ord bigint, j_key text, j_tag float8, j_w float8)
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM {{schema}}.fair_names
               WHERE weights IS NOT NULL) THEN
        WITH made AS (
            INSERT INTO {{schema}}.fair_paths (queue, path)
            SELECT DISTINCT u.q, '{}'::text[] FROM unnest(a_q, a_nm) AS u(q, nm)
            JOIN {{schema}}.fair_names fn ON fn.name = u.nm
            WHERE fn.weights IS NOT NULL
            ON CONFLICT DO NOTHING RETURNING queue)
        UPDATE {{schema}}.jobs j SET fair_key = coalesce((SELECT
            CASE WHEN fn.weights IS NOT NULL THEN j.name || chr(31)
            ELSE '' END || coalesce(j.payload #>> fn.path, '')
            FROM {{schema}}.fair_names fn WHERE fn.name = j.name), '')
        FROM made WHERE j.queue = made.queue
        AND j.state IN ('queued', 'running', 'waiting');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM {{schema}}.fair_paths) THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH x AS MATERIALIZED (
        SELECT t.ord, t.queue, t.key,
               row_number() OVER (PARTITION BY t.queue, t.key
                                  ORDER BY t.ord) AS rn,
               count(*) OVER (PARTITION BY t.queue, t.key) AS cnt
        FROM (SELECT u.ord, u.q AS queue, CASE
                  WHEN fn.weights IS NOT NULL
                  THEN u.nm || chr(31)
                       || coalesce(u.pl::jsonb #>> fn.path, '')
                  WHEN fn.path IS NOT NULL
                  THEN coalesce(u.pl::jsonb #>> fn.path, '')
                  WHEN cardinality(f.path) = 0 THEN ''
                  ELSE coalesce(u.pl::jsonb #>> f.path, '') END AS key
              FROM unnest(a_q, a_nm, a_pl) WITH ORDINALITY AS u(q, nm, pl, ord)
              JOIN {{schema}}.fair_paths f ON f.queue = u.q
              LEFT JOIN {{schema}}.fair_names fn ON fn.name = u.nm) t),
    k AS (
        INSERT INTO {{schema}}.fair_keys AS k (queue, key, pass)
        SELECT c.queue, c.key, coalesce(fc.clock, 0) + c.cnt
               / coalesce(CASE WHEN strpos(c.key, chr(31)) > 1
                          THEN {{schema}}.fair_name_w(c.key) END,
                          fk.weight, fk.cweight, fp.wdefault, 1)
        FROM (SELECT x.queue, x.key, count(*) AS cnt FROM x
              GROUP BY 1, 2) c
        LEFT JOIN {{schema}}.fair_keys fk
               ON fk.queue = c.queue AND fk.key = c.key
        LEFT JOIN {{schema}}.fair_paths fp ON fp.queue = c.queue
        LEFT JOIN {{schema}}.fair_clocks fc ON fc.queue = c.queue
        ORDER BY c.queue, c.key
        ON CONFLICT (queue, key) DO UPDATE SET pass = excluded.pass
            + greatest(k.pass - coalesce((SELECT fc.clock
              FROM {{schema}}.fair_clocks fc
              WHERE fc.queue = excluded.queue), 0), 0)
        RETURNING k.queue, k.key, k.pass, k.weight, k.cweight)
    SELECT x.ord, x.key, k.pass - (x.cnt - x.rn + 1) / ww.w, ww.w
    FROM x JOIN k ON k.queue = x.queue AND k.key = x.key
    JOIN {{schema}}.fair_paths p ON p.queue = x.queue
    CROSS JOIN LATERAL (SELECT coalesce(CASE WHEN
        strpos(k.key, chr(31)) > 1 THEN {{schema}}.fair_name_w(k.key) END,
        k.weight, k.cweight, p.wdefault, 1) AS w) ww;
END
$$;
-- migration 37
-- A fair key's value is capped at its first 512 characters (docs/
-- queues.md, "Fair share"), as on SQLite: a longer one (about 2,700
-- bytes that do not compress) exceeded what an entry of jobs_fair or
-- fair_keys' key holds, and the push failed naming neither. The
-- functions of migrations 34 and 36 with that value (pg_int.h's
-- JR_PG_FAIR_VAL spells it for the library's statements); the jobs
-- keyed before keep their keys.
CREATE OR REPLACE FUNCTION {{schema}}.jobs_queue_known() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {{schema}}.queues (name)
    SELECT DISTINCT n.queue FROM new_jobs n
    WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.queues q
                      WHERE q.name = n.queue)
    ON CONFLICT DO NOTHING;
    IF EXISTS (SELECT 1 FROM {{schema}}.fair_names
               WHERE weights IS NOT NULL) THEN
        WITH made AS (
            INSERT INTO {{schema}}.fair_paths (queue, path)
            SELECT DISTINCT n.queue, '{}'::text[] FROM new_jobs n
            JOIN {{schema}}.fair_names fn ON fn.name = n.name
            WHERE fn.weights IS NOT NULL AND n.fair_key IS NULL
            ON CONFLICT DO NOTHING RETURNING queue)
        UPDATE {{schema}}.jobs j SET fair_key = coalesce((SELECT
            CASE WHEN fn.weights IS NOT NULL THEN j.name || chr(31)
            ELSE '' END || left(coalesce(j.payload #>> fn.path, ''), 512)
            FROM {{schema}}.fair_names fn WHERE fn.name = j.name), '')
        FROM made WHERE j.queue = made.queue
        AND j.state IN ('queued', 'running', 'waiting');
    END IF;
    IF EXISTS (SELECT 1 FROM {{schema}}.fair_paths) THEN
        -- the finishes of the keys of the queued jobs, one upsert a key
        INSERT INTO {{schema}}.fair_keys AS k (queue, key, pass)
        SELECT c.queue, c.key, coalesce(fc.clock, 0) + c.cnt
               / coalesce(CASE WHEN strpos(c.key, chr(31)) > 1
                          THEN {{schema}}.fair_name_w(c.key) END,
                          fk.weight, fk.cweight, fp.wdefault, 1)
        -- (a job's key: in its name's scope when the name has weights,
        -- at its name's path, '' in a queue made fair by a name, or at
        -- the queue's path)
        FROM (SELECT n.queue, CASE
                  WHEN fn.weights IS NOT NULL
                  THEN n.name || chr(31)
                       || left(coalesce(n.payload #>> fn.path, ''), 512)
                  WHEN fn.path IS NOT NULL
                  THEN left(coalesce(n.payload #>> fn.path, ''), 512)
                  WHEN cardinality(f.path) = 0 THEN ''
                  ELSE left(coalesce(n.payload #>> f.path, ''), 512) END AS key,
                     count(*) AS cnt
              FROM new_jobs n
              JOIN {{schema}}.fair_paths f ON f.queue = n.queue
              LEFT JOIN {{schema}}.fair_names fn ON fn.name = n.name
              WHERE n.fair_key IS NULL AND n.state = 'queued'
              GROUP BY 1, 2) c
        LEFT JOIN {{schema}}.fair_keys fk
               ON fk.queue = c.queue AND fk.key = c.key
        LEFT JOIN {{schema}}.fair_paths fp ON fp.queue = c.queue
        LEFT JOIN {{schema}}.fair_clocks fc ON fc.queue = c.queue
        ORDER BY c.queue, c.key
        ON CONFLICT (queue, key) DO UPDATE SET pass = excluded.pass
            + greatest(k.pass - coalesce((SELECT fc.clock
              FROM {{schema}}.fair_clocks fc
              WHERE fc.queue = excluded.queue), 0), 0);
        -- each job's key, and a queued one's tag: up to its key's finish,
        -- 1/weight apart in id order
        UPDATE {{schema}}.jobs j
        SET fair_key = x.key, (fair_tag, fair_w) = (SELECT
                k.pass - (x.cnt - x.rn + 1) / w.w, w.w
            FROM {{schema}}.fair_keys k
            JOIN {{schema}}.fair_paths p ON p.queue = k.queue
            CROSS JOIN LATERAL (SELECT coalesce(CASE WHEN
                strpos(k.key, chr(31)) > 1 THEN
                {{schema}}.fair_name_w(k.key) END, k.weight, k.cweight,
                p.wdefault, 1) AS w) w
            WHERE x.state = 'queued' AND k.queue = x.queue
              AND k.key = x.key)
        FROM (SELECT t.*,
                     row_number() OVER (PARTITION BY t.queue, t.key, t.state
                                        ORDER BY t.id) AS rn,
                     count(*) OVER (PARTITION BY t.queue, t.key, t.state)
                         AS cnt
              FROM (SELECT n.id, n.queue, n.state, CASE
                        WHEN fn.weights IS NOT NULL
                        THEN n.name || chr(31)
                             || left(coalesce(n.payload #>> fn.path, ''), 512)
                        WHEN fn.path IS NOT NULL
                        THEN left(coalesce(n.payload #>> fn.path, ''), 512)
                        WHEN cardinality(f.path) = 0 THEN ''
                        ELSE left(coalesce(n.payload #>> f.path, ''), 512) END AS key
                    FROM new_jobs n
                    JOIN {{schema}}.fair_paths f ON f.queue = n.queue
                    LEFT JOIN {{schema}}.fair_names fn ON fn.name = n.name
                    WHERE n.fair_key IS NULL) t) x
        WHERE j.id = x.id;
    END IF;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION {{schema}}.fair_stamp(a_q text[], a_nm text[], a_pl text[])
RETURNS TABLE (j_ord bigint, j_key text, j_tag float8, j_w float8)
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM {{schema}}.fair_names
               WHERE weights IS NOT NULL) THEN
        WITH made AS (
            INSERT INTO {{schema}}.fair_paths (queue, path)
            SELECT DISTINCT u.q, '{}'::text[] FROM unnest(a_q, a_nm) AS u(q, nm)
            JOIN {{schema}}.fair_names fn ON fn.name = u.nm
            WHERE fn.weights IS NOT NULL
            ON CONFLICT DO NOTHING RETURNING queue)
        UPDATE {{schema}}.jobs j SET fair_key = coalesce((SELECT
            CASE WHEN fn.weights IS NOT NULL THEN j.name || chr(31)
            ELSE '' END || left(coalesce(j.payload #>> fn.path, ''), 512)
            FROM {{schema}}.fair_names fn WHERE fn.name = j.name), '')
        FROM made WHERE j.queue = made.queue
        AND j.state IN ('queued', 'running', 'waiting');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM {{schema}}.fair_paths) THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH x AS MATERIALIZED (
        SELECT t.ord, t.queue, t.key,
               row_number() OVER (PARTITION BY t.queue, t.key
                                  ORDER BY t.ord) AS rn,
               count(*) OVER (PARTITION BY t.queue, t.key) AS cnt
        FROM (SELECT u.ord, u.q AS queue, CASE
                  WHEN fn.weights IS NOT NULL
                  THEN u.nm || chr(31)
                       || left(coalesce(u.pl::jsonb #>> fn.path, ''), 512)
                  WHEN fn.path IS NOT NULL
                  THEN left(coalesce(u.pl::jsonb #>> fn.path, ''), 512)
                  WHEN cardinality(f.path) = 0 THEN ''
                  ELSE left(coalesce(u.pl::jsonb #>> f.path, ''), 512) END AS key
              FROM unnest(a_q, a_nm, a_pl) WITH ORDINALITY AS u(q, nm, pl, ord)
              JOIN {{schema}}.fair_paths f ON f.queue = u.q
              LEFT JOIN {{schema}}.fair_names fn ON fn.name = u.nm) t),
    k AS (
        INSERT INTO {{schema}}.fair_keys AS k (queue, key, pass)
        SELECT c.queue, c.key, coalesce(fc.clock, 0) + c.cnt
               / coalesce(CASE WHEN strpos(c.key, chr(31)) > 1
                          THEN {{schema}}.fair_name_w(c.key) END,
                          fk.weight, fk.cweight, fp.wdefault, 1)
        FROM (SELECT x.queue, x.key, count(*) AS cnt FROM x
              GROUP BY 1, 2) c
        LEFT JOIN {{schema}}.fair_keys fk
               ON fk.queue = c.queue AND fk.key = c.key
        LEFT JOIN {{schema}}.fair_paths fp ON fp.queue = c.queue
        LEFT JOIN {{schema}}.fair_clocks fc ON fc.queue = c.queue
        ORDER BY c.queue, c.key
        ON CONFLICT (queue, key) DO UPDATE SET pass = excluded.pass
            + greatest(k.pass - coalesce((SELECT fc.clock
              FROM {{schema}}.fair_clocks fc
              WHERE fc.queue = excluded.queue), 0), 0)
        RETURNING k.queue, k.key, k.pass, k.weight, k.cweight)
    SELECT x.ord, x.key, k.pass - (x.cnt - x.rn + 1) / ww.w, ww.w
    FROM x JOIN k ON k.queue = x.queue AND k.key = x.key
    JOIN {{schema}}.fair_paths p ON p.queue = x.queue
    CROSS JOIN LATERAL (SELECT coalesce(CASE WHEN
        strpos(k.key, chr(31)) > 1 THEN {{schema}}.fair_name_w(k.key) END,
        k.weight, k.cweight, p.wdefault, 1) AS w) ww;
END
$$;
-- migration 38
-- A job not yet due takes no turn of its key (docs/queues.md, "Fair
-- share"): an insert (jobs_queue_known) and a batch push (fair_stamp,
-- with the batch's run_at and run_in now) tag only their jobs due by
-- then, and a claim tags its queue's untagged jobs once due, each key
-- from the queue's clock then (fair.c), so a key's jobs pushed to run
-- later neither move its finish ahead of its job due now nor, once due,
-- start ahead of keys that waited. jobs_fairnew, an entry an untagged
-- job, is ordered by run_at for that tagging and for the fair claim's
-- look for untagged jobs: the due ones one range, however many wait for
-- later (by id they were read all, a million scheduled jobs, at every
-- claim). fair_stamp of three arrays stays for a runner of the schema
-- before. A queued job tagged before while not yet due gives its tag
-- back, to be tagged once due; its key's finish stays where that tag
-- moved it.
DROP INDEX {{schema}}.jobs_fairnew;
CREATE INDEX jobs_fairnew ON {{schema}}.jobs (queue, run_at, id)
    WHERE state = 'queued' AND fair_key IS NOT NULL AND fair_tag IS NULL;
UPDATE {{schema}}.jobs SET fair_tag = NULL, fair_w = NULL
    WHERE fair_tag IS NOT NULL AND state = 'queued' AND run_at > now();
CREATE OR REPLACE FUNCTION {{schema}}.jobs_queue_known() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {{schema}}.queues (name)
    SELECT DISTINCT n.queue FROM new_jobs n
    WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.queues q
                      WHERE q.name = n.queue)
    ON CONFLICT DO NOTHING;
    IF EXISTS (SELECT 1 FROM {{schema}}.fair_names
               WHERE weights IS NOT NULL) THEN
        WITH made AS (
            INSERT INTO {{schema}}.fair_paths (queue, path)
            SELECT DISTINCT n.queue, '{}'::text[] FROM new_jobs n
            JOIN {{schema}}.fair_names fn ON fn.name = n.name
            WHERE fn.weights IS NOT NULL AND n.fair_key IS NULL
            ON CONFLICT DO NOTHING RETURNING queue)
        UPDATE {{schema}}.jobs j SET fair_key = coalesce((SELECT
            CASE WHEN fn.weights IS NOT NULL THEN j.name || chr(31)
            ELSE '' END || left(coalesce(j.payload #>> fn.path, ''), 512)
            FROM {{schema}}.fair_names fn WHERE fn.name = j.name), '')
        FROM made WHERE j.queue = made.queue
        AND j.state IN ('queued', 'running', 'waiting');
    END IF;
    IF EXISTS (SELECT 1 FROM {{schema}}.fair_paths) THEN
        -- the finishes of the keys of the queued jobs, one upsert a key
        INSERT INTO {{schema}}.fair_keys AS k (queue, key, pass)
        SELECT c.queue, c.key, coalesce(fc.clock, 0) + c.cnt
               / coalesce(CASE WHEN strpos(c.key, chr(31)) > 1
                          THEN {{schema}}.fair_name_w(c.key) END,
                          fk.weight, fk.cweight, fp.wdefault, 1)
        -- (a job's key: in its name's scope when the name has weights,
        -- at its name's path, '' in a queue made fair by a name, or at
        -- the queue's path)
        FROM (SELECT n.queue, CASE
                  WHEN fn.weights IS NOT NULL
                  THEN n.name || chr(31)
                       || left(coalesce(n.payload #>> fn.path, ''), 512)
                  WHEN fn.path IS NOT NULL
                  THEN left(coalesce(n.payload #>> fn.path, ''), 512)
                  WHEN cardinality(f.path) = 0 THEN ''
                  ELSE left(coalesce(n.payload #>> f.path, ''), 512) END AS key,
                     count(*) AS cnt
              FROM new_jobs n
              JOIN {{schema}}.fair_paths f ON f.queue = n.queue
              LEFT JOIN {{schema}}.fair_names fn ON fn.name = n.name
              WHERE n.fair_key IS NULL AND n.state = 'queued'
                AND n.run_at <= now()
              GROUP BY 1, 2) c
        LEFT JOIN {{schema}}.fair_keys fk
               ON fk.queue = c.queue AND fk.key = c.key
        LEFT JOIN {{schema}}.fair_paths fp ON fp.queue = c.queue
        LEFT JOIN {{schema}}.fair_clocks fc ON fc.queue = c.queue
        ORDER BY c.queue, c.key
        ON CONFLICT (queue, key) DO UPDATE SET pass = excluded.pass
            + greatest(k.pass - coalesce((SELECT fc.clock
              FROM {{schema}}.fair_clocks fc
              WHERE fc.queue = excluded.queue), 0), 0);
        -- each job's key, and a queued one's tag when it is due: up to
        -- its key's finish, 1/weight apart in id order
        UPDATE {{schema}}.jobs j
        SET fair_key = x.key, (fair_tag, fair_w) = (SELECT
                k.pass - (x.cnt - x.rn + 1) / w.w, w.w
            FROM {{schema}}.fair_keys k
            JOIN {{schema}}.fair_paths p ON p.queue = k.queue
            CROSS JOIN LATERAL (SELECT coalesce(CASE WHEN
                strpos(k.key, chr(31)) > 1 THEN
                {{schema}}.fair_name_w(k.key) END, k.weight, k.cweight,
                p.wdefault, 1) AS w) w
            WHERE x.due AND k.queue = x.queue
              AND k.key = x.key)
        FROM (SELECT t.*,
                     row_number() OVER (PARTITION BY t.queue, t.key, t.due
                                        ORDER BY t.id) AS rn,
                     count(*) OVER (PARTITION BY t.queue, t.key, t.due)
                         AS cnt
              FROM (SELECT n.id, n.queue,
                        n.state = 'queued' AND n.run_at <= now() AS due, CASE
                        WHEN fn.weights IS NOT NULL
                        THEN n.name || chr(31)
                             || left(coalesce(n.payload #>> fn.path, ''), 512)
                        WHEN fn.path IS NOT NULL
                        THEN left(coalesce(n.payload #>> fn.path, ''), 512)
                        WHEN cardinality(f.path) = 0 THEN ''
                        ELSE left(coalesce(n.payload #>> f.path, ''), 512) END AS key
                    FROM new_jobs n
                    JOIN {{schema}}.fair_paths f ON f.queue = n.queue
                    LEFT JOIN {{schema}}.fair_names fn ON fn.name = n.name
                    WHERE n.fair_key IS NULL) t) x
        WHERE j.id = x.id;
    END IF;
    RETURN NULL;
END
$$;
CREATE FUNCTION {{schema}}.fair_stamp(a_q text[], a_nm text[], a_pl text[],
                                     a_at float8[], a_in float8[])
RETURNS TABLE (j_ord bigint, j_key text, j_tag float8, j_w float8)
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM {{schema}}.fair_names
               WHERE weights IS NOT NULL) THEN
        WITH made AS (
            INSERT INTO {{schema}}.fair_paths (queue, path)
            SELECT DISTINCT u.q, '{}'::text[] FROM unnest(a_q, a_nm) AS u(q, nm)
            JOIN {{schema}}.fair_names fn ON fn.name = u.nm
            WHERE fn.weights IS NOT NULL
            ON CONFLICT DO NOTHING RETURNING queue)
        UPDATE {{schema}}.jobs j SET fair_key = coalesce((SELECT
            CASE WHEN fn.weights IS NOT NULL THEN j.name || chr(31)
            ELSE '' END || left(coalesce(j.payload #>> fn.path, ''), 512)
            FROM {{schema}}.fair_names fn WHERE fn.name = j.name), '')
        FROM made WHERE j.queue = made.queue
        AND j.state IN ('queued', 'running', 'waiting');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM {{schema}}.fair_paths) THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH x AS MATERIALIZED (
        SELECT t.ord, t.queue, t.key, t.due,
               row_number() OVER (PARTITION BY t.queue, t.key, t.due
                                  ORDER BY t.ord) AS rn,
               count(*) OVER (PARTITION BY t.queue, t.key, t.due) AS cnt
        FROM (SELECT u.ord, u.q AS queue,
                  coalesce(to_timestamp(u.at), now()
                           + u.inn * interval '1 second', now()) <= now()
                      AS due, CASE
                  WHEN fn.weights IS NOT NULL
                  THEN u.nm || chr(31)
                       || left(coalesce(u.pl::jsonb #>> fn.path, ''), 512)
                  WHEN fn.path IS NOT NULL
                  THEN left(coalesce(u.pl::jsonb #>> fn.path, ''), 512)
                  WHEN cardinality(f.path) = 0 THEN ''
                  ELSE left(coalesce(u.pl::jsonb #>> f.path, ''), 512) END AS key
              FROM unnest(a_q, a_nm, a_pl, a_at, a_in) WITH ORDINALITY
                   AS u(q, nm, pl, at, inn, ord)
              JOIN {{schema}}.fair_paths f ON f.queue = u.q
              LEFT JOIN {{schema}}.fair_names fn ON fn.name = u.nm) t),
    k AS (
        INSERT INTO {{schema}}.fair_keys AS k (queue, key, pass)
        SELECT c.queue, c.key, coalesce(fc.clock, 0) + c.cnt
               / coalesce(CASE WHEN strpos(c.key, chr(31)) > 1
                          THEN {{schema}}.fair_name_w(c.key) END,
                          fk.weight, fk.cweight, fp.wdefault, 1)
        FROM (SELECT x.queue, x.key, count(*) AS cnt FROM x WHERE x.due
              GROUP BY 1, 2) c
        LEFT JOIN {{schema}}.fair_keys fk
               ON fk.queue = c.queue AND fk.key = c.key
        LEFT JOIN {{schema}}.fair_paths fp ON fp.queue = c.queue
        LEFT JOIN {{schema}}.fair_clocks fc ON fc.queue = c.queue
        ORDER BY c.queue, c.key
        ON CONFLICT (queue, key) DO UPDATE SET pass = excluded.pass
            + greatest(k.pass - coalesce((SELECT fc.clock
              FROM {{schema}}.fair_clocks fc
              WHERE fc.queue = excluded.queue), 0), 0)
        RETURNING k.queue, k.key, k.pass, k.weight, k.cweight)
    SELECT x.ord, x.key, CASE WHEN x.due
           THEN k.pass - (x.cnt - x.rn + 1) / ww.w END,
           CASE WHEN x.due THEN ww.w END
    FROM x LEFT JOIN k ON x.due AND k.queue = x.queue AND k.key = x.key
    JOIN {{schema}}.fair_paths p ON p.queue = x.queue
    CROSS JOIN LATERAL (SELECT coalesce(CASE WHEN
        strpos(k.key, chr(31)) > 1 THEN {{schema}}.fair_name_w(k.key) END,
        k.weight, k.cweight, p.wdefault, 1) AS w) ww;
END
$$;
-- migration 39
-- A fair key alike on both engines for the same payload, and a queue's
-- own key that cannot pose as a job name's (docs/queues.md, "Fair
-- share"). fair_val is a key's value: the payload's value at the path,
-- each step a field of an object (jsonb -> text: an array has none, as
-- SQLite's '$.a.0' is a field; #>> took 0 as an index), a string as it
-- is, true and false as the words, a number by its value (an integer as
-- its digits: 1e3, 1000 and 1000.0 are "1000"; another by its first 16
-- significant digits, as C's %.16g writes it), else (null, missing, an
-- object, an array) '', capped at 512 characters. fair_key is a job's
-- key: NAME, chr(31), value in a name's scope, else the value, with a
-- chr(31) put in front when it holds one, so that no queue's key spells
-- a name's scope (a name's key starts with the name, never with it).
-- A key's tags are from a base on (fair_keys.base, the queue's clock
-- when the key last started from it): its n-th job since is base +
-- n/weight (tw), one formula for a push alone, a batch and a claim's
-- tagging, so the same jobs get the same tags bit for bit; the finish
-- (pass) is base + n/tw. The keys of the jobs not ended are stamped
-- again; a queued one whose key changed gives its tag back, to be
-- tagged by its queue's next claim.
CREATE FUNCTION {{schema}}.fair_walk(d jsonb, p text[]) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    s text;
BEGIN
    FOREACH s IN ARRAY p LOOP
        d := d -> s;
        IF d IS NULL THEN
            RETURN NULL;
        END IF;
    END LOOP;
    RETURN d;
END
$$;
-- (inlined: each step a field, 4 steps written out, deeper ones walked)
CREATE FUNCTION {{schema}}.fair_at(d jsonb, p text[]) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE cardinality(p) WHEN 1 THEN d -> p[1]
        WHEN 2 THEN d -> p[1] -> p[2]
        WHEN 3 THEN d -> p[1] -> p[2] -> p[3]
        WHEN 4 THEN d -> p[1] -> p[2] -> p[3] -> p[4]
        ELSE {{schema}}.fair_walk(d, p) END
$$;
-- x as C's %.16g writes it (to_char's EEEE is C's %e): 16 significant
-- digits, trailing zeros dropped, an exponent below -4 or from 16 on
CREATE FUNCTION {{schema}}.fair_g16(x float8) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN e < -4 OR e >= 16
           THEN rtrim(rtrim(m, '0'), '.') || 'e'
                || CASE WHEN e < 0 THEN '-' ELSE '+' END
                || lpad(abs(e)::text, 2, '0')
           ELSE trim_scale((m || 'e' || e)::numeric)::text END
    FROM (SELECT split_part(s, 'e', 1) AS m, split_part(s, 'e', 2)::int AS e
          FROM (SELECT btrim(to_char(x, '9.999999999999999EEEE')) AS s) a) b
$$;
-- a number's key: beyond a double's range it is what SQLite reads
-- (Inf, or 0), where ::float8 fails
CREATE FUNCTION {{schema}}.fair_num(x numeric) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN x = trunc(x)
                 AND x BETWEEN -9223372036854775808 AND 9223372036854775807
           THEN x::bigint::text
           WHEN abs(x) >= 1.7976931348623158e308
           THEN CASE WHEN x > 0 THEN 'Inf' ELSE '-Inf' END
           WHEN abs(x) < 2.4703282292062328e-324 THEN '0'
           ELSE {{schema}}.fair_g16(x::float8) END
$$;
CREATE FUNCTION {{schema}}.fair_val(d jsonb, p text[]) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE jsonb_typeof({{schema}}.fair_at(d, p))
        WHEN 'string' THEN left({{schema}}.fair_at(d, p) #>> '{}', 512)
        WHEN 'boolean' THEN {{schema}}.fair_at(d, p) #>> '{}'
        -- (an integer of up to 18 characters is its text: numeric's
        -- has no exponent, no "-0"; the others by their value)
        WHEN 'number' THEN CASE WHEN length({{schema}}.fair_at(d, p)
            #>> '{}') < 19 AND strpos({{schema}}.fair_at(d, p) #>> '{}',
            '.') = 0 THEN {{schema}}.fair_at(d, p) #>> '{}'
            ELSE {{schema}}.fair_num(({{schema}}.fair_at(d, p))::numeric) END
        ELSE '' END
$$;
-- a key in a queue's scope: the value, chr(31) in front when it has one
-- (only a string can); fair_qkey of a value v, for fair set's KEY and
-- stats (v named once, so that a call is inlined whatever v's expression)
CREATE FUNCTION {{schema}}.fair_qval(d jsonb, p text[]) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE jsonb_typeof({{schema}}.fair_at(d, p))
        WHEN 'string' THEN CASE WHEN strpos(left({{schema}}.fair_at(d, p)
            #>> '{}', 512), chr(31)) > 0 THEN chr(31) ELSE '' END
            || left({{schema}}.fair_at(d, p) #>> '{}', 512)
        ELSE {{schema}}.fair_val(d, p) END
$$;
CREATE FUNCTION {{schema}}.fair_qkey(v text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT regexp_replace(v, '^(?=.*\x1f)', chr(31))
$$;
-- a job's key: name nm, payload d, its queue's path qp ('{}': made fair
-- by a name), its name's path np and weights nw (NULL: none)
CREATE FUNCTION {{schema}}.fair_key(nm text, d jsonb, qp text[], np text[],
                                   nw jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN nw IS NOT NULL
                THEN nm || chr(31) || {{schema}}.fair_val(d, np)
                WHEN np IS NOT NULL THEN {{schema}}.fair_qval(d, np)
                WHEN cardinality(qp) = 0 THEN ''
                ELSE {{schema}}.fair_qval(d, qp) END
$$;
ALTER TABLE {{schema}}.fair_keys ADD COLUMN base double precision,
    ADD COLUMN n bigint NOT NULL DEFAULT 0,
    ADD COLUMN tw double precision;
UPDATE {{schema}}.fair_keys SET base = pass;
UPDATE {{schema}}.jobs j SET fair_key = x.key,
    fair_tag = CASE WHEN j.state = 'queued' THEN NULL ELSE j.fair_tag END,
    fair_w = CASE WHEN j.state = 'queued' THEN NULL ELSE j.fair_w END
FROM (SELECT o.id, {{schema}}.fair_key(o.name, o.payload, f.path, fn.path,
                                       fn.weights) AS key
      FROM {{schema}}.jobs o
      JOIN {{schema}}.fair_paths f ON f.queue = o.queue
      LEFT JOIN {{schema}}.fair_names fn ON fn.name = o.name
      WHERE o.state IN ('queued', 'running', 'waiting')
        AND o.fair_key IS NOT NULL) x
WHERE j.id = x.id AND j.fair_key IS DISTINCT FROM x.key;
CREATE OR REPLACE FUNCTION {{schema}}.jobs_queue_known() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {{schema}}.queues (name)
    SELECT DISTINCT n.queue FROM new_jobs n
    WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.queues q
                      WHERE q.name = n.queue)
    ON CONFLICT DO NOTHING;
    IF EXISTS (SELECT 1 FROM {{schema}}.fair_names
               WHERE weights IS NOT NULL) THEN
        WITH made AS (
            INSERT INTO {{schema}}.fair_paths (queue, path)
            SELECT DISTINCT n.queue, '{}'::text[] FROM new_jobs n
            JOIN {{schema}}.fair_names fn ON fn.name = n.name
            WHERE fn.weights IS NOT NULL AND n.fair_key IS NULL
            ON CONFLICT DO NOTHING RETURNING queue)
        UPDATE {{schema}}.jobs j SET fair_key = coalesce((SELECT
            {{schema}}.fair_key(j.name, j.payload, '{}', fn.path, fn.weights)
            FROM {{schema}}.fair_names fn WHERE fn.name = j.name), '')
        FROM made WHERE j.queue = made.queue
        AND j.state IN ('queued', 'running', 'waiting');
    END IF;
    IF EXISTS (SELECT 1 FROM {{schema}}.fair_paths) THEN
        -- the finishes of the keys of the queued jobs due, one upsert a
        -- key: from its base on while it is ahead of the clock, else
        -- from the clock
        INSERT INTO {{schema}}.fair_keys AS k (queue, key, pass, base, n, tw)
        SELECT c.queue, c.key, coalesce(fc.clock, 0) + c.cnt / w.w,
               coalesce(fc.clock, 0), c.cnt, w.w
        FROM (SELECT n.queue, {{schema}}.fair_key(n.name, n.payload, f.path,
                                                  fn.path, fn.weights) AS key,
                     count(*) AS cnt
              FROM new_jobs n
              JOIN {{schema}}.fair_paths f ON f.queue = n.queue
              LEFT JOIN {{schema}}.fair_names fn ON fn.name = n.name
              WHERE n.fair_key IS NULL AND n.state = 'queued'
                AND n.run_at <= now()
              GROUP BY 1, 2) c
        LEFT JOIN {{schema}}.fair_keys fk
               ON fk.queue = c.queue AND fk.key = c.key
        LEFT JOIN {{schema}}.fair_paths fp ON fp.queue = c.queue
        LEFT JOIN {{schema}}.fair_clocks fc ON fc.queue = c.queue
        CROSS JOIN LATERAL (SELECT coalesce(CASE WHEN
            strpos(c.key, chr(31)) > 1 THEN {{schema}}.fair_name_w(c.key)
            END, fk.weight, fk.cweight, fp.wdefault, 1) AS w) w
        ORDER BY c.queue, c.key
        ON CONFLICT (queue, key) DO UPDATE SET
            base = CASE WHEN k.pass > excluded.base AND k.base IS NOT NULL
                   THEN k.base ELSE excluded.base END,
            n = CASE WHEN k.pass > excluded.base AND k.base IS NOT NULL
                THEN k.n + excluded.n ELSE excluded.n END,
            pass = CASE WHEN k.pass > excluded.base AND k.base IS NOT NULL
                   THEN k.base + (k.n + excluded.n) / excluded.tw
                   ELSE excluded.pass END,
            tw = excluded.tw;
        -- each job's key, and a queued one's tag when it is due: its
        -- key's base + its place since it / weight, in id order
        UPDATE {{schema}}.jobs j
        SET fair_key = x.key, (fair_tag, fair_w) = (SELECT
                k.base + (k.n - x.cnt + x.rn - 1) / k.tw, k.tw
            FROM {{schema}}.fair_keys k
            WHERE x.due AND k.queue = x.queue AND k.key = x.key)
        FROM (SELECT t.*,
                     row_number() OVER (PARTITION BY t.queue, t.key, t.due
                                        ORDER BY t.id) AS rn,
                     count(*) OVER (PARTITION BY t.queue, t.key, t.due)
                         AS cnt
              FROM (SELECT n.id, n.queue,
                        n.state = 'queued' AND n.run_at <= now() AS due,
                        {{schema}}.fair_key(n.name, n.payload, f.path,
                                            fn.path, fn.weights) AS key
                    FROM new_jobs n
                    JOIN {{schema}}.fair_paths f ON f.queue = n.queue
                    LEFT JOIN {{schema}}.fair_names fn ON fn.name = n.name
                    WHERE n.fair_key IS NULL) t) x
        WHERE j.id = x.id;
    END IF;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION {{schema}}.fair_stamp(a_q text[], a_nm text[],
                                                a_pl text[], a_at float8[],
                                                a_in float8[])
RETURNS TABLE (j_ord bigint, j_key text, j_tag float8, j_w float8)
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM {{schema}}.fair_names
               WHERE weights IS NOT NULL) THEN
        WITH made AS (
            INSERT INTO {{schema}}.fair_paths (queue, path)
            SELECT DISTINCT u.q, '{}'::text[] FROM unnest(a_q, a_nm) AS u(q, nm)
            JOIN {{schema}}.fair_names fn ON fn.name = u.nm
            WHERE fn.weights IS NOT NULL
            ON CONFLICT DO NOTHING RETURNING queue)
        UPDATE {{schema}}.jobs j SET fair_key = coalesce((SELECT
            {{schema}}.fair_key(j.name, j.payload, '{}', fn.path, fn.weights)
            FROM {{schema}}.fair_names fn WHERE fn.name = j.name), '')
        FROM made WHERE j.queue = made.queue
        AND j.state IN ('queued', 'running', 'waiting');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM {{schema}}.fair_paths) THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH x AS MATERIALIZED (
        SELECT t.ord, t.queue, t.key, t.due,
               row_number() OVER (PARTITION BY t.queue, t.key, t.due
                                  ORDER BY t.ord) AS rn,
               count(*) OVER (PARTITION BY t.queue, t.key, t.due) AS cnt
        FROM (SELECT u.ord, u.q AS queue,
                  coalesce(to_timestamp(u.at), now()
                           + u.inn * interval '1 second', now()) <= now()
                      AS due,
                  {{schema}}.fair_key(u.nm, u.pl, f.path, fn.path,
                                      fn.weights) AS key
              FROM unnest(a_q, a_nm, a_pl::jsonb[], a_at, a_in)
                   WITH ORDINALITY AS u(q, nm, pl, at, inn, ord)
              JOIN {{schema}}.fair_paths f ON f.queue = u.q
              LEFT JOIN {{schema}}.fair_names fn ON fn.name = u.nm) t),
    k AS (
        INSERT INTO {{schema}}.fair_keys AS k (queue, key, pass, base, n, tw)
        SELECT c.queue, c.key, coalesce(fc.clock, 0) + c.cnt / w.w,
               coalesce(fc.clock, 0), c.cnt, w.w
        FROM (SELECT x.queue, x.key, count(*) AS cnt FROM x WHERE x.due
              GROUP BY 1, 2) c
        LEFT JOIN {{schema}}.fair_keys fk
               ON fk.queue = c.queue AND fk.key = c.key
        LEFT JOIN {{schema}}.fair_paths fp ON fp.queue = c.queue
        LEFT JOIN {{schema}}.fair_clocks fc ON fc.queue = c.queue
        CROSS JOIN LATERAL (SELECT coalesce(CASE WHEN
            strpos(c.key, chr(31)) > 1 THEN {{schema}}.fair_name_w(c.key)
            END, fk.weight, fk.cweight, fp.wdefault, 1) AS w) w
        ORDER BY c.queue, c.key
        ON CONFLICT (queue, key) DO UPDATE SET
            base = CASE WHEN k.pass > excluded.base AND k.base IS NOT NULL
                   THEN k.base ELSE excluded.base END,
            n = CASE WHEN k.pass > excluded.base AND k.base IS NOT NULL
                THEN k.n + excluded.n ELSE excluded.n END,
            pass = CASE WHEN k.pass > excluded.base AND k.base IS NOT NULL
                   THEN k.base + (k.n + excluded.n) / excluded.tw
                   ELSE excluded.pass END,
            tw = excluded.tw
        RETURNING k.queue, k.key, k.base, k.n, k.tw)
    SELECT x.ord, x.key, CASE WHEN x.due
           THEN k.base + (k.n - x.cnt + x.rn - 1) / k.tw END,
           CASE WHEN x.due THEN k.tw END
    FROM x LEFT JOIN k ON x.due AND k.queue = x.queue AND k.key = x.key;
END
$$;
-- the batch push of the schema before migration 38, every job due
CREATE OR REPLACE FUNCTION {{schema}}.fair_stamp(a_q text[], a_nm text[],
                                                a_pl text[])
RETURNS TABLE (j_ord bigint, j_key text, j_tag float8, j_w float8)
LANGUAGE sql AS $$
    SELECT * FROM {{schema}}.fair_stamp(a_q, a_nm, a_pl, NULL::float8[],
                                        NULL::float8[])
$$;
-- migration 40
-- A fair queue's job replaced by a newer push (docs/queues.md, "Newer
-- replaces older", "Fair share"): a unique key's queued job, or a
-- sequence's pending last one, that takes the push's payload and run_at
-- is keyed and tagged as a push of them would be: its key stamped again
-- from the new payload (the queue's path, or its name's own), its tag
-- dropped and given again only when it is due now (a job due later takes
-- no turn of its key; the first claim after its run_at tags it). The
-- turn its old tag took goes back to its key when it was the key's last
-- (the key's n-th since its base: the finish moves back by 1/weight, so
-- the key's next job takes that tag); one with later jobs of the key
-- after it stays spent. fair_give is that give-back (also for the
-- sequence's job just pushed, deleted when the last job takes its
-- payload), fair_replaced the whole of it; push_keyed (migration 23's)
-- and sequence_put (migration 35's) call them. A job in no fair queue
-- pays one look-up of its row. The replaced job's limit key is the
-- push's too (push_keyed kept the old one when the new payload had
-- none; sequence_put kept it always).
CREATE FUNCTION {{schema}}.fair_give(jid bigint) RETURNS void
LANGUAGE sql AS $$
    -- base + (n - 1) / tw is the tag the key's n-th job was given (the
    -- insert trigger's and fair_stamp's arithmetic, equal to the bit)
    UPDATE {{schema}}.fair_keys k SET n = k.n - 1,
        pass = k.base + (k.n - 1) / k.tw
    FROM {{schema}}.jobs j
    WHERE j.id = jid AND j.fair_tag IS NOT NULL
      AND k.queue = j.queue AND k.key = j.fair_key
      AND k.n > 0 AND k.tw = j.fair_w
      AND k.base + (k.n - 1) / k.tw = j.fair_tag;
    UPDATE {{schema}}.jobs j SET fair_tag = NULL, fair_w = NULL
    WHERE j.id = jid AND j.fair_tag IS NOT NULL;
$$;
CREATE FUNCTION {{schema}}.fair_replaced(jid bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM {{schema}}.jobs j
                   WHERE j.id = jid AND j.fair_key IS NOT NULL) THEN
        RETURN;                 -- in no fair queue: nothing keyed
    END IF;
    PERFORM {{schema}}.fair_give(jid);
    -- fair_stamp keys it as a push, and tags it (moving its key's
    -- finish) when it is due: queued, run_at by now
    UPDATE {{schema}}.jobs j SET (fair_key, fair_tag, fair_w) = (
        SELECT f.j_key, f.j_tag, f.j_w
        FROM {{schema}}.fair_stamp(ARRAY[j.queue], ARRAY[j.name],
            ARRAY[j.payload::text],
            ARRAY[CASE WHEN j.state = 'queued' AND j.run_at <= now()
                  THEN NULL ELSE 'infinity'::float8 END],
            NULL::float8[]) f)
    WHERE j.id = jid;
END
$$;
CREATE OR REPLACE FUNCTION {{schema}}.push_keyed(name text,
                                      payload jsonb DEFAULT '{}',
                                      run_at timestamptz DEFAULT now(),
                                      priority int DEFAULT 0,
                                      queue text DEFAULT 'default',
                                      max_retries int DEFAULT NULL,
                                      unique_key text DEFAULT NULL,
                                      unique_for interval DEFAULT NULL,
                                      on_conflict text DEFAULT 'keep',
                                      key text DEFAULT NULL,
                                      OUT id bigint, OUT outcome text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    k text;
    oc text := push_keyed.on_conflict;
    gone bigint;
    cancelled boolean := false;
BEGIN
    IF oc = 'cancel_running' THEN
        IF push_keyed.unique_key IS NULL THEN
            RAISE EXCEPTION 'jobrunner.push: unique_for and on_conflict need a unique_key'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR gone IN UPDATE {{schema}}.jobs j SET unique_key = NULL
            WHERE j.name = push_keyed.name
              AND j.unique_key = push_keyed.unique_key
              AND j.state = 'running'
            RETURNING j.id
        LOOP
            PERFORM {{schema}}.cancel(gone);
            DELETE FROM {{schema}}.unique_keys u
            WHERE u.name = push_keyed.name
              AND u.unique_key = push_keyed.unique_key AND u.job_id = gone;
            cancelled := true;
        END LOOP;
        oc := 'replace';
    END IF;
    SELECT p.id, p.outcome INTO push_keyed.id, push_keyed.outcome
    FROM {{schema}}.push_unique(push_keyed.name, push_keyed.payload,
        push_keyed.run_at, push_keyed.priority, push_keyed.queue,
        push_keyed.max_retries, push_keyed.unique_key, push_keyed.unique_for,
        oc) p;
    IF cancelled AND push_keyed.outcome = 'new' THEN
        push_keyed.outcome := 'superseded';
    END IF;
    IF push_keyed.outcome = 'replaced' THEN
        PERFORM {{schema}}.fair_replaced(push_keyed.id);
    END IF;
    IF push_keyed.outcome <> 'duplicate' THEN
        k := {{schema}}.limit_key_of(push_keyed.name,
                                     coalesce(push_keyed.payload, '{}'),
                                     push_keyed.key);
        -- (a replaced job's from its new payload, none if it has none)
        IF k IS NOT NULL OR push_keyed.outcome = 'replaced' THEN
            UPDATE {{schema}}.jobs j SET limit_key = k
            WHERE j.id = push_keyed.id;
        END IF;
    END IF;
END
$$;
CREATE OR REPLACE FUNCTION {{schema}}.sequence_put(id bigint, key text,
                                        on_failure text DEFAULT 'block',
                                        on_conflict text DEFAULT 'keep',
                                        OUT job_id bigint,
                                        OUT outcome text)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    child bigint := sequence_put.id;
    t bigint;
    tst text;
    tfail text;
    tleft int;
    n bigint;
    pst text;
    pres jsonb;
    cpay jsonb;
    crun timestamptz;
    clim text;
    gone bigint;
    cancelled boolean := false;
BEGIN
    IF sequence_put.on_failure IS NULL
       OR sequence_put.on_failure NOT IN ('block', 'skip', 'dead') THEN
        RAISE EXCEPTION 'jobrunner.sequence: on_failure ''%'' is not block, skip or dead',
            sequence_put.on_failure USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF sequence_put.on_conflict IS NULL OR sequence_put.on_conflict
       NOT IN ('keep', 'replace', 'cancel_running') THEN
        RAISE EXCEPTION 'jobrunner.sequence: on_conflict ''%'' is not keep, replace or cancel_running',
            sequence_put.on_conflict USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF sequence_put.key IS NULL OR octet_length(sequence_put.key) NOT BETWEEN 1 AND 256 THEN
        RAISE EXCEPTION 'jobrunner.sequence: job %: the sequence key must have 1 to 256 bytes',
            child USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(
        '{{schema}}.sequence ' || sequence_put.key, 0));
    SELECT j.id, j.state, j.seq_fail, j.seq_no, j.parents_left
    INTO t, tst, tfail, n, tleft
    FROM {{schema}}.jobs j WHERE j.sequence_key = sequence_put.key
    ORDER BY j.seq_no DESC LIMIT 1;
    -- the last one ended (cancelled) while jobs before it may not have:
    -- the last of those that holds the sequence is the one to wait for
    -- (or to replace); n stays the last place, the new job's comes after
    IF t IS NOT NULL AND NOT (tst IN ('queued', 'running', 'waiting')
                              OR (tst = 'dead' AND tfail = 'block')) THEN
        SELECT j.id, j.state, j.seq_fail, j.parents_left
        INTO t, tst, tfail, tleft
        FROM {{schema}}.jobs j WHERE j.sequence_key = sequence_put.key
          AND (j.state IN ('queued', 'running', 'waiting')
               OR (j.state = 'dead' AND j.seq_fail = 'block'))
        ORDER BY j.seq_no DESC LIMIT 1;
    END IF;
    SELECT j.payload, j.run_at, j.limit_key INTO cpay, crun, clim
    FROM {{schema}}.jobs j
    WHERE j.id = child AND j.state = 'queued' AND j.sequence_key IS NULL
      AND j.parents_left = 0;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobrunner.sequence: job % is not a queued job of no sequence',
            child USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF sequence_put.on_conflict = 'cancel_running' THEN
        FOR gone IN SELECT j.id FROM {{schema}}.jobs j
            WHERE j.sequence_key = sequence_put.key AND j.state = 'running'
        LOOP
            PERFORM {{schema}}.cancel(gone);
            cancelled := true;
        END LOOP;
    END IF;
    IF sequence_put.on_conflict <> 'keep' AND t IS NOT NULL
       AND (tst = 'queued' OR (tst = 'waiting' AND tleft > 0)) THEN
        -- a claim holding the row makes this wait, then find it running
        UPDATE {{schema}}.jobs j SET payload = cpay, run_at = crun,
            limit_key = clim, updated_at = now()
        WHERE j.id = t AND (j.state = 'queued'
                            OR (j.state = 'waiting' AND j.parents_left > 0));
        IF FOUND THEN
            -- the job just pushed gives its turn back first (the last
            -- one its key gave), then the last job takes its own
            PERFORM {{schema}}.fair_give(child);
            PERFORM {{schema}}.fair_replaced(t);
            DELETE FROM {{schema}}.jobs j WHERE j.id = child;
            job_id := t;
            outcome := 'replaced';
            RETURN;
        END IF;
    END IF;
    job_id := child;
    outcome := CASE WHEN cancelled THEN 'superseded' ELSE 'new' END;
    UPDATE {{schema}}.jobs j SET sequence_key = sequence_put.key,
        seq_no = coalesce(n, 0) + 1, seq_fail = sequence_put.on_failure
    WHERE j.id = child AND j.state = 'queued' AND j.sequence_key IS NULL
      AND j.parents_left = 0;
    IF t IS NULL OR NOT (tst IN ('queued', 'running', 'waiting')
                         OR (tst = 'dead' AND tfail = 'block')) THEN
        RETURN;
    END IF;
    -- the row lock orders this with the tail's end: a success deleting it
    -- meanwhile leaves nothing to wait for
    UPDATE {{schema}}.jobs j SET flow = j.flow | 1 WHERE j.id = t
    RETURNING j.state, j.result INTO pst, pres;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE {{schema}}.jobs j SET state = 'waiting', parents_left = 1,
        on_parent_failure = CASE WHEN tfail = 'dead' THEN 'dead'
                            ELSE 'run' END
    WHERE j.id = child;
    IF pst NOT IN ('completed', 'dead', 'cancelled') THEN
        pst := NULL;
        pres := NULL;
    END IF;
    INSERT INTO {{schema}}.job_deps (parent_id, child_id, parent_state,
                                     parent_result)
    VALUES (t, child, pst, pres);
    IF pst IS NOT NULL THEN
        PERFORM {{schema}}.flow_edge(child, t, pst);
    END IF;
END
$$;
-- migration 41
-- A limit key alike on both engines for the same payload (docs/limits.md,
-- "The limit key"): the value at the limit's path by the fair key's rules
-- (fair_at, fair_num: fair_val's), each step a field of an object (#>> took "a.0" as
-- an index into an array, SQLite's '$.a.0' a field), a string as it is, a
-- number by its value (1e3, 1000 and 1000.0 are "1000" where #>> gave
-- "1000.0" for the last; 1.50 is "1.5"; another fraction as C's %.16g
-- writes it); anything else (true, false, null, an object, an array,
-- missing) or a text not of 1 to 256 bytes leaves the job unkeyed, as
-- before. A key given at push is kept as given. The jobs not ended whose
-- stored key is what the old rule took from their payload take the new
-- rule's (a key given at push that happens to equal it cannot be told
-- from one taken, and is taken for one); an unkeyed job stays unkeyed, as
-- does one whose key differs from its payload's.
-- limit_val is plpgsql, its expression planned once a session: a SQL
-- function with a subquery (limit_key_of) is planned at each call, and
-- the rules inlined in it made that plan 0.25 ms a push (a batch of 20,000
-- integer keys went from 38,000 jobs/s to 4,000); push.c spells
-- limit_val out in a push's statement, planned with it. fair_g16 likewise:
-- the same steps, in plpgsql, as a SQL function with a FROM is planned
-- again wherever its call starts afresh (a key with a fraction took 0.1 ms
-- in limit_key_of, 0.04 ms now).
CREATE OR REPLACE FUNCTION {{schema}}.fair_g16(x float8) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    s text := btrim(to_char(x, '9.999999999999999EEEE'));
    m text := split_part(s, 'e', 1);
    e int := split_part(s, 'e', 2)::int;
BEGIN
    IF e < -4 OR e >= 16 THEN
        RETURN rtrim(rtrim(m, '0'), '.') || 'e'
               || CASE WHEN e < 0 THEN '-' ELSE '+' END
               || lpad(abs(e)::text, 2, '0');
    END IF;
    RETURN trim_scale((m || 'e' || e)::numeric)::text;
END
$$;
-- a limit key's value at path p of d: fair_val's for a string or a number
-- (a string whole: one over 512 characters is over 256 bytes anyway),
-- NULL (unkeyed) for another type
CREATE FUNCTION {{schema}}.limit_val(d jsonb, p text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    x jsonb := {{schema}}.fair_at(d, p);
BEGIN
    RETURN CASE jsonb_typeof(x) WHEN 'string' THEN x #>> '{}'
           WHEN 'number' THEN {{schema}}.fair_num(x::numeric) END;
END
$$;
CREATE OR REPLACE FUNCTION {{schema}}.limit_key_of(name text, payload jsonb,
                                                   key text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT coalesce(limit_key_of.key, (SELECT v FROM (
        SELECT {{schema}}.limit_val(limit_key_of.payload,
                                    string_to_array(lp.path, '.')) AS v
        FROM {{schema}}.limit_paths lp
        WHERE lp.name = limit_key_of.name) x
        WHERE octet_length(v) BETWEEN 1 AND 256))
$$;
UPDATE {{schema}}.jobs j SET limit_key = x.key
FROM (SELECT o.id, {{schema}}.limit_key_of(o.name, o.payload, NULL) AS key
      FROM {{schema}}.jobs o
      JOIN {{schema}}.limit_paths lp ON lp.name = o.name
      CROSS JOIN LATERAL (SELECT string_to_array(lp.path, '.') AS p) a
      WHERE o.state IN ('queued', 'running', 'waiting')
        AND o.limit_key = o.payload #>> a.p
        AND jsonb_typeof(o.payload #> a.p) IN ('string', 'number')) x
WHERE j.id = x.id AND j.limit_key IS DISTINCT FROM x.key;
-- migration 42
-- A job put to wait behind its sequence takes no turn of its fair key
-- (docs/queues.md, "Fair share", "Sequences"): sequence_put (migration
-- 40's) gives the job's turn back with fair_give when it goes to wait,
-- so a job not ready holds no tag and its key's next job takes the turn;
-- the first claim after the job is queued tags it. A turn with later
-- ones of its key after it stays spent (fair_give's rule). Waiting jobs
-- tagged by a push before drop their tags (their turns stay spent: later
-- ones of their keys follow them); they are tagged once queued, as
-- before.
UPDATE {{schema}}.jobs SET fair_tag = NULL, fair_w = NULL
    WHERE state = 'waiting' AND fair_tag IS NOT NULL;
-- A batch's jobs are tagged in push order before they are linked, so
-- one waiting behind another of the batch would have later tags of its
-- key after its own: for a batch with jobs of sequences (flow.c),
-- fair_seq_give gives back the turns of jobs ids, in the array's order
-- (the batch's last first), each whose tag is then its key's last,
-- before the links; fair_seq_tag tags those of them queued untagged
-- after the links, in the array's order (the batch's), as a push of each
-- would (fair_replaced). A batch in no fair queue pays one look-up of
-- its rows in each.
CREATE FUNCTION {{schema}}.fair_seq_give(ids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    jid bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM {{schema}}.jobs j
                   WHERE j.id = ANY (ids) AND j.fair_key IS NOT NULL) THEN
        RETURN;                 -- in no fair queue: nothing tagged
    END IF;
    FOREACH jid IN ARRAY ids LOOP
        PERFORM {{schema}}.fair_give(j.id)
        FROM {{schema}}.jobs j JOIN {{schema}}.fair_keys k
          ON k.queue = j.queue AND k.key = j.fair_key
        WHERE j.id = jid AND j.fair_tag IS NOT NULL AND k.n > 0
          AND k.tw = j.fair_w AND k.base + (k.n - 1) / k.tw = j.fair_tag;
    END LOOP;
END
$$;
CREATE FUNCTION {{schema}}.fair_seq_tag(ids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    jid bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM {{schema}}.jobs j
                   WHERE j.id = ANY (ids) AND j.fair_key IS NOT NULL) THEN
        RETURN;                 -- in no fair queue: nothing tagged
    END IF;
    FOREACH jid IN ARRAY ids LOOP
        PERFORM {{schema}}.fair_replaced(j.id) FROM {{schema}}.jobs j
        WHERE j.id = jid AND j.state = 'queued'
          AND j.fair_key IS NOT NULL AND j.fair_tag IS NULL;
    END LOOP;
END
$$;
CREATE OR REPLACE FUNCTION {{schema}}.sequence_put(id bigint, key text,
                                        on_failure text DEFAULT 'block',
                                        on_conflict text DEFAULT 'keep',
                                        OUT job_id bigint,
                                        OUT outcome text)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    child bigint := sequence_put.id;
    t bigint;
    tst text;
    tfail text;
    tleft int;
    n bigint;
    pst text;
    pres jsonb;
    cpay jsonb;
    crun timestamptz;
    clim text;
    gone bigint;
    cancelled boolean := false;
BEGIN
    IF sequence_put.on_failure IS NULL
       OR sequence_put.on_failure NOT IN ('block', 'skip', 'dead') THEN
        RAISE EXCEPTION 'jobrunner.sequence: on_failure ''%'' is not block, skip or dead',
            sequence_put.on_failure USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF sequence_put.on_conflict IS NULL OR sequence_put.on_conflict
       NOT IN ('keep', 'replace', 'cancel_running') THEN
        RAISE EXCEPTION 'jobrunner.sequence: on_conflict ''%'' is not keep, replace or cancel_running',
            sequence_put.on_conflict USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF sequence_put.key IS NULL OR octet_length(sequence_put.key) NOT BETWEEN 1 AND 256 THEN
        RAISE EXCEPTION 'jobrunner.sequence: job %: the sequence key must have 1 to 256 bytes',
            child USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(
        '{{schema}}.sequence ' || sequence_put.key, 0));
    SELECT j.id, j.state, j.seq_fail, j.seq_no, j.parents_left
    INTO t, tst, tfail, n, tleft
    FROM {{schema}}.jobs j WHERE j.sequence_key = sequence_put.key
    ORDER BY j.seq_no DESC LIMIT 1;
    -- the last one ended (cancelled) while jobs before it may not have:
    -- the last of those that holds the sequence is the one to wait for
    -- (or to replace); n stays the last place, the new job's comes after
    IF t IS NOT NULL AND NOT (tst IN ('queued', 'running', 'waiting')
                              OR (tst = 'dead' AND tfail = 'block')) THEN
        SELECT j.id, j.state, j.seq_fail, j.parents_left
        INTO t, tst, tfail, tleft
        FROM {{schema}}.jobs j WHERE j.sequence_key = sequence_put.key
          AND (j.state IN ('queued', 'running', 'waiting')
               OR (j.state = 'dead' AND j.seq_fail = 'block'))
        ORDER BY j.seq_no DESC LIMIT 1;
    END IF;
    SELECT j.payload, j.run_at, j.limit_key INTO cpay, crun, clim
    FROM {{schema}}.jobs j
    WHERE j.id = child AND j.state = 'queued' AND j.sequence_key IS NULL
      AND j.parents_left = 0;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobrunner.sequence: job % is not a queued job of no sequence',
            child USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF sequence_put.on_conflict = 'cancel_running' THEN
        FOR gone IN SELECT j.id FROM {{schema}}.jobs j
            WHERE j.sequence_key = sequence_put.key AND j.state = 'running'
        LOOP
            PERFORM {{schema}}.cancel(gone);
            cancelled := true;
        END LOOP;
    END IF;
    IF sequence_put.on_conflict <> 'keep' AND t IS NOT NULL
       AND (tst = 'queued' OR (tst = 'waiting' AND tleft > 0)) THEN
        -- a claim holding the row makes this wait, then find it running
        UPDATE {{schema}}.jobs j SET payload = cpay, run_at = crun,
            limit_key = clim, updated_at = now()
        WHERE j.id = t AND (j.state = 'queued'
                            OR (j.state = 'waiting' AND j.parents_left > 0));
        IF FOUND THEN
            -- the job just pushed gives its turn back first (the last
            -- one its key gave), then the last job takes its own
            PERFORM {{schema}}.fair_give(child);
            PERFORM {{schema}}.fair_replaced(t);
            DELETE FROM {{schema}}.jobs j WHERE j.id = child;
            job_id := t;
            outcome := 'replaced';
            RETURN;
        END IF;
    END IF;
    job_id := child;
    outcome := CASE WHEN cancelled THEN 'superseded' ELSE 'new' END;
    UPDATE {{schema}}.jobs j SET sequence_key = sequence_put.key,
        seq_no = coalesce(n, 0) + 1, seq_fail = sequence_put.on_failure
    WHERE j.id = child AND j.state = 'queued' AND j.sequence_key IS NULL
      AND j.parents_left = 0;
    IF t IS NULL OR NOT (tst IN ('queued', 'running', 'waiting')
                         OR (tst = 'dead' AND tfail = 'block')) THEN
        RETURN;
    END IF;
    -- the row lock orders this with the tail's end: a success deleting it
    -- meanwhile leaves nothing to wait for
    UPDATE {{schema}}.jobs j SET flow = j.flow | 1 WHERE j.id = t
    RETURNING j.state, j.result INTO pst, pres;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE {{schema}}.jobs j SET state = 'waiting', parents_left = 1,
        on_parent_failure = CASE WHEN tfail = 'dead' THEN 'dead'
                            ELSE 'run' END
    WHERE j.id = child;
    -- waiting, it takes no turn of its key: its turn back when its tag
    -- is the key's last, its tag dropped either way
    PERFORM {{schema}}.fair_give(child);
    IF pst NOT IN ('completed', 'dead', 'cancelled') THEN
        pst := NULL;
        pres := NULL;
    END IF;
    INSERT INTO {{schema}}.job_deps (parent_id, child_id, parent_state,
                                     parent_result)
    VALUES (t, child, pst, pres);
    IF pst IS NOT NULL THEN
        PERFORM {{schema}}.flow_edge(child, t, pst);
    END IF;
END
$$;
-- migration 43
-- A job's name and queue checked for their characters once a distinct
-- pair of an insert statement (jobs_names_ok, beside jobs_queue_known,
-- which reads the same rows: PostgreSQL keeps one copy of them for both
-- triggers), and at an UPDATE that changes them, not by a regex in each
-- row's CHECKs: those two were 7% of a batch push of 1000. The CHECKs
-- keep the lengths, in bytes (the same as in characters: those allowed
-- are ASCII); NOT VALID, as every row passed the stricter ones before
-- (no scan at the upgrade). A bad name is refused as by the CHECK: the
-- statement fails with SQLSTATE 23514 naming jobs_name_check (or
-- jobs_queue_check), the value in its detail as a JSON string (control
-- bytes escaped). The function's search_path is its own: the CHECK's
-- operator was fixed when it was made, and a session's search_path with
-- its own ~ ahead of pg_catalog's passed any name through the trigger.
ALTER TABLE {{schema}}.jobs DROP CONSTRAINT jobs_name_check,
    DROP CONSTRAINT jobs_queue_check;
ALTER TABLE {{schema}}.jobs
    ADD CONSTRAINT jobs_name_check
        CHECK (octet_length(name) BETWEEN 1 AND 128) NOT VALID,
    ADD CONSTRAINT jobs_queue_check
        CHECK (octet_length(queue) BETWEEN 1 AND 128) NOT VALID;
CREATE FUNCTION {{schema}}.jobs_names_ok() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n text;
    q text;
    what text;
BEGIN
    IF TG_LEVEL = 'ROW' THEN
        n := NEW.name;
        q := NEW.queue;
    ELSE
        SELECT d.name, d.queue INTO n, q
        FROM (SELECT DISTINCT j.name, j.queue FROM new_jobs j OFFSET 0) d
        WHERE d.name !~ '^[A-Za-z0-9_.:-]+$'
           OR d.queue !~ '^[A-Za-z0-9_.:-]+$'
        LIMIT 1;
        IF NOT FOUND THEN      -- (OFFSET 0: the regex after DISTINCT,
            RETURN NULL;       -- not pushed down to every row)
        END IF;
    END IF;
    IF n !~ '^[A-Za-z0-9_.:-]+$' THEN
        what := 'name';
    ELSIF q !~ '^[A-Za-z0-9_.:-]+$' THEN
        what := 'queue';
        n := q;
    ELSE
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'new row for relation "jobs" violates check constraint "jobs_%_check"', what
        USING ERRCODE = 'check_violation',
              CONSTRAINT = 'jobs_' || what || '_check',
              TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA,
              DETAIL = format('A job''s %s is 1 to 128 of A-Z a-z 0-9 _ . : -, not %s.',
                              what, to_json(left(n, 200))::text);
END
$$;
CREATE TRIGGER jobs_names_ok AFTER INSERT ON {{schema}}.jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.jobs_names_ok();
CREATE TRIGGER jobs_names_moved AFTER UPDATE OF name, queue ON {{schema}}.jobs
    FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name
                       OR OLD.queue IS DISTINCT FROM NEW.queue)
    EXECUTE FUNCTION {{schema}}.jobs_names_ok();
