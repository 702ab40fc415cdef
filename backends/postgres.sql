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
