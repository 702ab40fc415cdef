-- postgres.sql - the PostgreSQL schema, as numbered migrations. Each block
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
-- The push rules of the runtime (jr_push_check, README "Push rules") for
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
-- migration 6
-- Limits per key (README "Limits"). A job may carry a limit key, given at
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
-- push gains the key option: SELECT jobrunner.push('email.send',
-- '{"account_id": 7}', key => 'acct-7');
DROP FUNCTION {{schema}}.push(text, jsonb, timestamptz, int, text, int);
CREATE FUNCTION {{schema}}.push(name text, payload jsonb DEFAULT '{}',
                                run_at timestamptz DEFAULT now(),
                                priority int DEFAULT 0,
                                queue text DEFAULT 'default',
                                max_retries int DEFAULT NULL,
                                key text DEFAULT NULL)
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
                                 max_retries, limit_key)
    VALUES (push.name, coalesce(push.payload, '{}'),
            coalesce(push.run_at, now()), coalesce(push.priority, 0),
            coalesce(push.queue, 'default'), push.max_retries,
            {{schema}}.limit_key_of(push.name, coalesce(push.payload, '{}'),
                                    push.key))
    RETURNING id INTO new_id;
    RETURN new_id;
END
$$;
