-- schema.sql - the SQLite schema, as numbered migrations. Each block after a
-- "-- migration N" line runs once, in one IMMEDIATE transaction, and sets
-- PRAGMA user_version = N. Times are REAL seconds since the Unix epoch.
-- migration 1
CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,  -- increasing, never reused
    name         TEXT    NOT NULL
                 CHECK (length(name) BETWEEN 1 AND 128
                        AND name NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    payload      TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    queue        TEXT    NOT NULL DEFAULT 'default'
                 CHECK (length(queue) BETWEEN 1 AND 128
                        AND queue NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    priority     INTEGER NOT NULL DEFAULT 0,         -- lower runs first
    state        TEXT    NOT NULL DEFAULT 'queued'
                 CHECK (state IN ('queued', 'running', 'dead')),
    run_at       REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    attempts     INTEGER NOT NULL DEFAULT 0,         -- counted at claim
    max_retries  INTEGER CHECK (max_retries >= 0),   -- NULL: handler's or default
    last_error   TEXT,
    generation   TEXT,                               -- handler code that last ran it
    created_at   REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    updated_at   REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    died_at      REAL,
    locked_by    TEXT,                               -- runner token while running
    locked_until REAL                                -- lease end while running
);
CREATE INDEX jobs_claim ON jobs (priority, run_at, id) WHERE state = 'queued';
CREATE INDEX jobs_lease ON jobs (locked_until) WHERE state = 'running';
CREATE INDEX jobs_locked_by ON jobs (locked_by) WHERE state = 'running';
CREATE INDEX jobs_dead ON jobs (died_at) WHERE state = 'dead';
-- migration 2
-- The push rules of the runtime (jr_push_check, docs/cli.md "Push rules") for
-- plain-SQL producers too: run_at must be a finite number of epoch seconds
-- (an infinite one would never run, NaN arrives as NULL).
CREATE TRIGGER jobs_run_at_check BEFORE INSERT ON jobs
WHEN typeof(NEW.run_at) NOT IN ('real', 'integer')
     OR abs(NEW.run_at) > 253402300799
BEGIN
    SELECT RAISE(ABORT, 'run_at must be finite epoch seconds, at most 253402300799 (9999-12-31)');
END;
-- migration 3
-- Queues and control. States gain cancelled and completed (kept for the
-- retention period when the runner is configured so); a job records when
-- it started and finished, its progress and whether a cancel was
-- requested while it ran. SQLite cannot change a CHECK: the table is
-- rebuilt with the same ids and AUTOINCREMENT sequence.
CREATE TABLE jobs_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,  -- increasing, never reused
    name         TEXT    NOT NULL
                 CHECK (length(name) BETWEEN 1 AND 128
                        AND name NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    payload      TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    queue        TEXT    NOT NULL DEFAULT 'default'
                 CHECK (length(queue) BETWEEN 1 AND 128
                        AND queue NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    priority     INTEGER NOT NULL DEFAULT 0,         -- lower runs first
    state        TEXT    NOT NULL DEFAULT 'queued'
                 CHECK (state IN ('queued', 'running', 'dead', 'cancelled',
                                  'completed')),
    run_at       REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    attempts     INTEGER NOT NULL DEFAULT 0,         -- counted at claim
    max_retries  INTEGER CHECK (max_retries >= 0),   -- NULL: handler's or default
    last_error   TEXT,
    generation   TEXT,                               -- handler code that last ran it
    created_at   REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    updated_at   REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    died_at      REAL,
    locked_by    TEXT,                               -- runner token while running
    locked_until REAL,                               -- lease end while running
    started_at   REAL,                               -- last claim
    finished_at  REAL,                               -- completed, cancelled, dead
    progress_done  REAL,                             -- NULL until reported
    progress_total REAL,
    progress_note  TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1))
);
INSERT INTO jobs_new (id, name, payload, queue, priority, state, run_at,
                      attempts, max_retries, last_error, generation,
                      created_at, updated_at, died_at, locked_by,
                      locked_until, finished_at)
SELECT id, name, payload, queue, priority, state, run_at, attempts,
       max_retries, last_error, generation, created_at, updated_at, died_at,
       locked_by, locked_until, died_at
FROM jobs ORDER BY id;
-- ids stay above every id ever given, deleted ones included
UPDATE sqlite_sequence SET seq = max(seq, coalesce(
    (SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0))
WHERE name = 'jobs_new';
INSERT INTO sqlite_sequence (name, seq)
SELECT 'jobs_new', seq FROM sqlite_sequence WHERE name = 'jobs'
AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'jobs_new');
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;
-- the claim: per queue, in priority, run_at, id order (fair claims read
-- the first few of each queue)
CREATE INDEX jobs_claim ON jobs (queue, priority, run_at, id)
    WHERE state = 'queued';
CREATE INDEX jobs_lease ON jobs (locked_until) WHERE state = 'running';
CREATE INDEX jobs_locked_by ON jobs (locked_by) WHERE state = 'running';
CREATE INDEX jobs_dead ON jobs (died_at) WHERE state = 'dead';
CREATE INDEX jobs_completed ON jobs (finished_at) WHERE state = 'completed';
CREATE INDEX jobs_cancelled ON jobs (finished_at) WHERE state = 'cancelled';
-- running jobs whose cancel was requested, polled by their runner
CREATE INDEX jobs_cancel ON jobs (locked_by)
    WHERE state = 'running' AND cancel_requested = 1;
CREATE TRIGGER jobs_run_at_check BEFORE INSERT ON jobs
WHEN typeof(NEW.run_at) NOT IN ('real', 'integer')
     OR abs(NEW.run_at) > 253402300799
BEGIN
    SELECT RAISE(ABORT, 'run_at must be finite epoch seconds, at most 253402300799 (9999-12-31)');
END;
-- One row per queue name ever used. paused = 1 stops every claim from it;
-- plain SQL pauses with
--   INSERT INTO queues (name, paused, paused_at) VALUES ('mail', 1,
--       (julianday('now') - 2440587.5) * 86400.0)
--   ON CONFLICT (name) DO UPDATE SET paused = 1, paused_at = excluded.paused_at;
-- and resumes with UPDATE queues SET paused = 0, paused_at = NULL WHERE ...
CREATE TABLE queues (
    name       TEXT    PRIMARY KEY
               CHECK (length(name) BETWEEN 1 AND 128
                      AND name NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    paused     INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    paused_at  REAL,
    updated_at REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0)
) WITHOUT ROWID;
INSERT INTO queues (name) SELECT DISTINCT queue FROM jobs;
-- every push, plain SQL ones too, makes its queue known to claims (they
-- read the queues table to find the queues with work), and so does moving
-- a job to another queue
CREATE TRIGGER jobs_queue_known AFTER INSERT ON jobs
BEGIN
    INSERT INTO queues (name) SELECT NEW.queue
    WHERE NOT EXISTS (SELECT 1 FROM queues WHERE name = NEW.queue);
END;
CREATE TRIGGER jobs_queue_moved AFTER UPDATE OF queue ON jobs
BEGIN
    INSERT INTO queues (name) SELECT NEW.queue
    WHERE NOT EXISTS (SELECT 1 FROM queues WHERE name = NEW.queue);
END;
-- migration 4
-- Unique jobs (docs/schedules.md, "Unique jobs"). A job may carry a
-- unique key: while a job of the same name and key is queued (scheduled
-- included) or running, the unique index refuses a second one, and a
-- push returns the holder's id instead. Keys are 1 to 255 bytes without
-- NUL bytes.
ALTER TABLE jobs ADD COLUMN unique_key TEXT
    CHECK (unique_key IS NULL OR (typeof(unique_key) = 'text'
           AND length(CAST(unique_key AS BLOB)) BETWEEN 1 AND 255
           AND instr(CAST(unique_key AS BLOB), x'00') = 0));
CREATE UNIQUE INDEX jobs_unique ON jobs (name, unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('queued', 'running');
-- Keys held for a window (push option unique_for): a push of name and key
-- is a duplicate of job_id until held_until, whatever became of that job.
-- Expired rows are taken over by the next push of the key and deleted by
-- the runner's pruner.
CREATE TABLE unique_keys (
    name       TEXT    NOT NULL,
    unique_key TEXT    NOT NULL,
    job_id     INTEGER,                          -- the job that took the key
    held_until REAL    NOT NULL,
    PRIMARY KEY (name, unique_key)
) WITHOUT ROWID;
CREATE INDEX unique_keys_until ON unique_keys (held_until);
-- migration 5
-- Recurring jobs: one row per fire of a schedule, inserted with its job in
-- one transaction. The primary key makes a fire happen once whatever the
-- number of runners; the row outlives the job (the newest few are kept
-- per schedule), so a late runner's catch-up does not fire it again.
CREATE TABLE schedule_fires (
    schedule   TEXT    NOT NULL,
    fire_at    REAL    NOT NULL,                    -- the fire instant
    job_id     INTEGER,                             -- the job it inserted
    created_at REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    PRIMARY KEY (schedule, fire_at)
) WITHOUT ROWID;
-- migration 6
-- Limits per key (docs/limits.md). A job may carry a limit key, given at
-- push or taken from its payload at push time by the path its runner
-- declared in limit_paths; the claim skips keys at their cap. Token
-- buckets of rate limits are rows refilled by time: a missing row is a
-- full bucket.
ALTER TABLE jobs ADD COLUMN limit_key TEXT
    CHECK (limit_key IS NULL OR length(CAST(limit_key AS BLOB)) BETWEEN 1 AND 256);
CREATE TABLE limit_buckets (
    scope      TEXT NOT NULL,                -- job name, or queue:NAME
    key        TEXT NOT NULL DEFAULT '',     -- '': the scope's own bucket
    tokens     REAL NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (scope, key)
) WITHOUT ROWID;
-- job name -> payload path ("account_id", "a.b") its key is taken from
CREATE TABLE limit_paths (
    name TEXT PRIMARY KEY,
    path TEXT NOT NULL
) WITHOUT ROWID;
-- migration 7
-- Cheaper checks on every insert, the same rules (docs/performance.md,
-- "Batch push"):
-- the state CHECK compares with each state instead of an IN list (SQLite
-- builds a table of the list while it checks inserted rows), and the
-- trigger that makes a queue known runs only when the queue is not known
-- yet (its WHEN is tested inline; its body is a sub-program). SQLite
-- cannot change a CHECK: the table is rebuilt with the same columns in
-- the same order, the same ids and AUTOINCREMENT sequence, indexes and
-- triggers.
CREATE TABLE jobs_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,  -- increasing, never reused
    name         TEXT    NOT NULL
                 CHECK (length(name) BETWEEN 1 AND 128
                        AND name NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    payload      TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    queue        TEXT    NOT NULL DEFAULT 'default'
                 CHECK (length(queue) BETWEEN 1 AND 128
                        AND queue NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    priority     INTEGER NOT NULL DEFAULT 0,         -- lower runs first
    state        TEXT    NOT NULL DEFAULT 'queued'
                 CHECK (state = 'queued' OR state = 'running'
                        OR state = 'dead' OR state = 'cancelled'
                        OR state = 'completed'),
    run_at       REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    attempts     INTEGER NOT NULL DEFAULT 0,         -- counted at claim
    max_retries  INTEGER CHECK (max_retries >= 0),   -- NULL: handler's or default
    last_error   TEXT,
    generation   TEXT,                               -- handler code that last ran it
    created_at   REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    updated_at   REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    died_at      REAL,
    locked_by    TEXT,                               -- runner token while running
    locked_until REAL,                               -- lease end while running
    started_at   REAL,                               -- last claim
    finished_at  REAL,                               -- completed, cancelled, dead
    progress_done  REAL,                             -- NULL until reported
    progress_total REAL,
    progress_note  TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
    unique_key   TEXT
                 CHECK (unique_key IS NULL OR (typeof(unique_key) = 'text'
                        AND length(CAST(unique_key AS BLOB)) BETWEEN 1 AND 255
                        AND instr(CAST(unique_key AS BLOB), x'00') = 0)),
    limit_key    TEXT
                 CHECK (limit_key IS NULL
                        OR length(CAST(limit_key AS BLOB)) BETWEEN 1 AND 256)
);
INSERT INTO jobs_new SELECT * FROM jobs ORDER BY id;
-- ids stay above every id ever given, deleted ones included
UPDATE sqlite_sequence SET seq = max(seq, coalesce(
    (SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0))
WHERE name = 'jobs_new';
INSERT INTO sqlite_sequence (name, seq)
SELECT 'jobs_new', seq FROM sqlite_sequence WHERE name = 'jobs'
AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'jobs_new');
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;
CREATE INDEX jobs_claim ON jobs (queue, priority, run_at, id)
    WHERE state = 'queued';
CREATE INDEX jobs_lease ON jobs (locked_until) WHERE state = 'running';
CREATE INDEX jobs_locked_by ON jobs (locked_by) WHERE state = 'running';
CREATE INDEX jobs_dead ON jobs (died_at) WHERE state = 'dead';
CREATE INDEX jobs_completed ON jobs (finished_at) WHERE state = 'completed';
CREATE INDEX jobs_cancelled ON jobs (finished_at) WHERE state = 'cancelled';
CREATE INDEX jobs_cancel ON jobs (locked_by)
    WHERE state = 'running' AND cancel_requested = 1;
CREATE UNIQUE INDEX jobs_unique ON jobs (name, unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('queued', 'running');
CREATE TRIGGER jobs_run_at_check BEFORE INSERT ON jobs
WHEN typeof(NEW.run_at) NOT IN ('real', 'integer')
     OR abs(NEW.run_at) > 253402300799
BEGIN
    SELECT RAISE(ABORT, 'run_at must be finite epoch seconds, at most 253402300799 (9999-12-31)');
END;
CREATE TRIGGER jobs_queue_known AFTER INSERT ON jobs
WHEN NOT EXISTS (SELECT 1 FROM queues WHERE name = NEW.queue)
BEGIN
    INSERT INTO queues (name) SELECT NEW.queue
    WHERE NOT EXISTS (SELECT 1 FROM queues WHERE name = NEW.queue);
END;
CREATE TRIGGER jobs_queue_moved AFTER UPDATE OF queue ON jobs
WHEN NOT EXISTS (SELECT 1 FROM queues WHERE name = NEW.queue)
BEGIN
    INSERT INTO queues (name) SELECT NEW.queue
    WHERE NOT EXISTS (SELECT 1 FROM queues WHERE name = NEW.queue);
END;
-- migration 8
-- One index fewer to keep per job (docs/performance.md): a claim wrote
-- jobs_locked_by's entry and the end of the job removed it again, and it
-- served only the lease renewal, every few seconds. Renewal now reads the
-- running jobs through jobs_lease (a runner's are a few hundred of them).
DROP INDEX IF EXISTS jobs_locked_by;
-- migration 10
-- Results (docs/handlers.md, "Return values"): a handler's return value
-- as JSON text, NULL when it returned nothing; result_ttl, seconds a push
-- (or a producer waiting on the job) asked it to stay completed after
-- success, NULL for the runner's own; keep_until, when a completed job
-- kept for its result is pruned (NULL: retention.completed decides).
ALTER TABLE jobs ADD COLUMN result TEXT;
ALTER TABLE jobs ADD COLUMN result_ttl REAL
    CHECK (result_ttl IS NULL OR (result_ttl > 0 AND result_ttl <= 315360000));
ALTER TABLE jobs ADD COLUMN keep_until REAL;
CREATE INDEX jobs_kept ON jobs (keep_until)
    WHERE state = 'completed' AND keep_until IS NOT NULL;
-- migration 11
-- Workflows (docs/workflows.md): a job may wait for others (its parents)
-- and belong to a batch whose callbacks are pushed once every member
-- ended. States gain waiting (parents unfinished: never claimed). flow
-- is a bit set the completing transaction reads to know whether there
-- is anything to decide (1: the job has children, 2: it is in a batch),
-- so a plain job's end pays nothing; parents_left counts the unfinished
-- parents, on_parent_failure says what a parent ending dead or cancelled
-- does to the job (NULL: cancel), parents is the JSON the handler sees
-- as job.parents, written when the job becomes ready. SQLite cannot
-- change a CHECK: the table is rebuilt as in migration 7.
CREATE TABLE jobs_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,  -- increasing, never reused
    name         TEXT    NOT NULL
                 CHECK (length(name) BETWEEN 1 AND 128
                        AND name NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    payload      TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    queue        TEXT    NOT NULL DEFAULT 'default'
                 CHECK (length(queue) BETWEEN 1 AND 128
                        AND queue NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    priority     INTEGER NOT NULL DEFAULT 0,         -- lower runs first
    state        TEXT    NOT NULL DEFAULT 'queued'
                 CHECK (state = 'queued' OR state = 'running'
                        OR state = 'dead' OR state = 'cancelled'
                        OR state = 'completed' OR state = 'waiting'),
    run_at       REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    attempts     INTEGER NOT NULL DEFAULT 0,         -- counted at claim
    max_retries  INTEGER CHECK (max_retries >= 0),   -- NULL: handler's or default
    last_error   TEXT,
    generation   TEXT,                               -- handler code that last ran it
    created_at   REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    updated_at   REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    died_at      REAL,
    locked_by    TEXT,                               -- runner token while running
    locked_until REAL,                               -- lease end while running
    started_at   REAL,                               -- last claim
    finished_at  REAL,                               -- completed, cancelled, dead
    progress_done  REAL,                             -- NULL until reported
    progress_total REAL,
    progress_note  TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
    unique_key   TEXT
                 CHECK (unique_key IS NULL OR (typeof(unique_key) = 'text'
                        AND length(CAST(unique_key AS BLOB)) BETWEEN 1 AND 255
                        AND instr(CAST(unique_key AS BLOB), x'00') = 0)),
    limit_key    TEXT
                 CHECK (limit_key IS NULL
                        OR length(CAST(limit_key AS BLOB)) BETWEEN 1 AND 256),
    result       TEXT,
    result_ttl   REAL
                 CHECK (result_ttl IS NULL OR (result_ttl > 0 AND result_ttl <= 315360000)),
    keep_until   REAL,
    flow         INTEGER NOT NULL DEFAULT 0,         -- 1 children, 2 batch
    parents_left INTEGER NOT NULL DEFAULT 0,         -- unfinished parents
    -- ORs, not IN (...): SQLite builds an IN list's table for every row
    -- a CHECK looks at (a page zeroed per insert), as for state above
    on_parent_failure TEXT
                 CHECK (on_parent_failure = 'cancel' OR on_parent_failure = 'run'
                        OR on_parent_failure = 'dead'),
    batch_id     INTEGER,                            -- its batch, or NULL
    parents      TEXT                                -- job.parents, JSON
);
INSERT INTO jobs_new (id, name, payload, queue, priority, state, run_at,
    attempts, max_retries, last_error, generation, created_at, updated_at,
    died_at, locked_by, locked_until, started_at, finished_at,
    progress_done, progress_total, progress_note, cancel_requested,
    unique_key, limit_key, result, result_ttl, keep_until)
SELECT id, name, payload, queue, priority, state, run_at,
    attempts, max_retries, last_error, generation, created_at, updated_at,
    died_at, locked_by, locked_until, started_at, finished_at,
    progress_done, progress_total, progress_note, cancel_requested,
    unique_key, limit_key, result, result_ttl, keep_until FROM jobs
ORDER BY id;
UPDATE sqlite_sequence SET seq = max(seq, coalesce(
    (SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0))
WHERE name = 'jobs_new';
INSERT INTO sqlite_sequence (name, seq)
SELECT 'jobs_new', seq FROM sqlite_sequence WHERE name = 'jobs'
AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'jobs_new');
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;
CREATE INDEX jobs_claim ON jobs (queue, priority, run_at, id)
    WHERE state = 'queued';
CREATE INDEX jobs_lease ON jobs (locked_until) WHERE state = 'running';
CREATE INDEX jobs_dead ON jobs (died_at) WHERE state = 'dead';
CREATE INDEX jobs_completed ON jobs (finished_at) WHERE state = 'completed';
CREATE INDEX jobs_cancelled ON jobs (finished_at) WHERE state = 'cancelled';
CREATE INDEX jobs_cancel ON jobs (locked_by)
    WHERE state = 'running' AND cancel_requested = 1;
CREATE UNIQUE INDEX jobs_unique ON jobs (name, unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('queued', 'running');
CREATE INDEX jobs_kept ON jobs (keep_until)
    WHERE state = 'completed' AND keep_until IS NOT NULL;
CREATE INDEX jobs_waiting ON jobs (id) WHERE state = 'waiting';
CREATE INDEX jobs_batch ON jobs (batch_id) WHERE batch_id IS NOT NULL;
CREATE TRIGGER jobs_run_at_check BEFORE INSERT ON jobs
WHEN typeof(NEW.run_at) NOT IN ('real', 'integer')
     OR abs(NEW.run_at) > 253402300799
BEGIN
    SELECT RAISE(ABORT, 'run_at must be finite epoch seconds, at most 253402300799 (9999-12-31)');
END;
CREATE TRIGGER jobs_queue_known AFTER INSERT ON jobs
WHEN NOT EXISTS (SELECT 1 FROM queues WHERE name = NEW.queue)
BEGIN
    INSERT INTO queues (name) SELECT NEW.queue
    WHERE NOT EXISTS (SELECT 1 FROM queues WHERE name = NEW.queue);
END;
CREATE TRIGGER jobs_queue_moved AFTER UPDATE OF queue ON jobs
WHEN NOT EXISTS (SELECT 1 FROM queues WHERE name = NEW.queue)
BEGIN
    INSERT INTO queues (name) SELECT NEW.queue
    WHERE NOT EXISTS (SELECT 1 FROM queues WHERE name = NEW.queue);
END;
-- One row per dependency. parent_state and parent_result are written once,
-- by the transaction that records the parent's end: they outlive the
-- parent's row (a success deletes it) for the child's job.parents.
CREATE TABLE job_deps (
    parent_id     INTEGER NOT NULL,
    child_id      INTEGER NOT NULL,
    parent_state  TEXT,                  -- NULL while the parent runs
    parent_result TEXT,                  -- JSON, when it had one
    PRIMARY KEY (parent_id, child_id)
) WITHOUT ROWID;
CREATE INDEX job_deps_child ON job_deps (child_id);
-- A batch: pending counts the members not yet ended; the transaction
-- that takes it to 0 sets finished_at and pushes the callbacks, so they
-- are pushed once. Members are listed in batch_jobs with their end.
CREATE TABLE batches (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    on_complete  TEXT,                   -- job name pushed when all ended
    on_success   TEXT,                   -- job name pushed when all completed
    payload      TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    queue        TEXT NOT NULL DEFAULT 'default',  -- of the callbacks
    results      INTEGER NOT NULL DEFAULT 0,   -- callbacks get the results
    total        INTEGER NOT NULL DEFAULT 0,
    pending      INTEGER NOT NULL DEFAULT 0,
    completed    INTEGER NOT NULL DEFAULT 0,
    dead         INTEGER NOT NULL DEFAULT 0,
    cancelled    INTEGER NOT NULL DEFAULT 0,
    created_at   REAL NOT NULL,
    finished_at  REAL,                   -- when the last member ended
    complete_job INTEGER,                -- the callbacks' ids, once pushed
    success_job  INTEGER
);
CREATE TABLE batch_jobs (
    batch_id  INTEGER NOT NULL,
    job_id    INTEGER NOT NULL,
    state     TEXT,                      -- NULL until the member ended
    result    TEXT,
    PRIMARY KEY (batch_id, job_id)
) WITHOUT ROWID;
CREATE INDEX batch_jobs_job ON batch_jobs (job_id);
-- migration 12
-- The attempt history (docs/operations.md, "Attempt history"). Each
-- failed attempt of a job (its handler's error or timeout, a worker's
-- death blamed on it, a lease lost with its runner) appends
-- {"attempt", "error", "at", "duration", "runner", "worker",
-- "generation"} to attempt_log, a JSON array of the newest 20
-- (JR_ATTEMPTS_KEPT), in the statement that records the failure. It
-- stays NULL for a job that never failed (a success writes nothing more)
-- and goes with its row. The view reads it as rows, oldest first (n):
--   SELECT * FROM job_attempts WHERE job_id = 42 ORDER BY n;
ALTER TABLE jobs ADD COLUMN attempt_log TEXT;
CREATE VIEW job_attempts AS
SELECT j.id AS job_id, e.key + 1 AS n,
       json_extract(e.value, '$.attempt') AS attempt,
       json_extract(e.value, '$.error') AS error,
       json_extract(e.value, '$.at') AS at,
       json_extract(e.value, '$.duration') AS duration,
       json_extract(e.value, '$.runner') AS runner,
       json_extract(e.value, '$.worker') AS worker,
       json_extract(e.value, '$.generation') AS generation
FROM jobs j, json_each(j.attempt_log) e
WHERE j.attempt_log IS NOT NULL;
-- Schedule controls (docs/schedules.md, "Pause, resume, fire now"): a
-- row per schedule an operator paused, resumed or fired by hand. While
-- paused = 1 every fire of the schedule is refused (the fire's
-- transaction reads it). fire_at is the instant of the last fire asked
-- for by hand: a runner fires it through the fires table like any fire,
-- once. Plain SQL pauses with
--   INSERT INTO schedules (name, paused, paused_at) VALUES ('nightly', 1,
--       (julianday('now') - 2440587.5) * 86400.0)
--   ON CONFLICT (name) DO UPDATE SET paused = 1,
--       paused_at = excluded.paused_at;
CREATE TABLE schedules (
    name       TEXT    PRIMARY KEY
               CHECK (length(name) BETWEEN 1 AND 128
                      AND name NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    paused     INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    paused_at  REAL,
    fire_at    REAL,                                -- fire asked by hand
    updated_at REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0)
) WITHOUT ROWID;
-- migration 13
-- Indexes a plain job does not pay for. An UPDATE maintains every index
-- whose columns or WHERE name a column it sets, and a DELETE every index:
-- a claim sets state, so the kept jobs' index now names keep_until alone
-- (set only when a job is kept: prune still finds them by it); the index
-- of waiting jobs and the one of batch members had no query that needed
-- them (a batch's members are batch_jobs rows; a waiting job is reached
-- by its id).
DROP INDEX IF EXISTS jobs_kept;
DROP INDEX IF EXISTS jobs_waiting;
DROP INDEX IF EXISTS jobs_batch;
CREATE INDEX jobs_kept ON jobs (keep_until) WHERE keep_until IS NOT NULL;
-- migration 14
-- The jobs with a unique key by it: a dead job retried looks up who else
-- holds its key here (admin.c's RETRY_KEY), where it scanned the table,
-- once per job a bulk retry requeued. Only a change of name or key
-- maintains it; a job without a key is never in it.
CREATE INDEX jobs_key ON jobs (name, unique_key) WHERE unique_key IS NOT NULL;
-- migration 15
-- A job's steps (docs/handlers.md, "Steps and cursors"): the records of
-- jobrunner.step and jobrunner.checkpoint, a JSON array in the order the
-- steps ran, each {"name", "value" (once the step returned) or "cursor"
-- (its last checkpoint), "at", "secs", "attempt"}. NULL for a job that
-- records none: the claim reads it in its own SELECT, and a plain job
-- pays a null. Set only by the runner that holds the job (and by rerun).
ALTER TABLE jobs ADD COLUMN steps TEXT;
-- migration 16
-- Signals and durable sleep (docs/handlers.md, "Signals and durable
-- sleep"). waits is the job's record of them, NULL for a job that never
-- waited nor was signalled, read by the claim with the job: {"signals":
-- {name: {"payload", "at"}}, "timeouts": {name: deadline}, "deadlines":
-- {name: deadline}, "sleeps": {"1": wake, ...}}. A waiting job (state
-- 'waiting', as a flow's child waiting for its parents) waits for the
-- signal wait_on, or for the date wake_at (a sleep, or a signal's
-- deadline). Plain SQL sends a signal as the runtime does: the row
-- changes unless the job ended, had this signal already or timed out
-- waiting for it (RETURNING no row: refused, nothing changed):
--   UPDATE jobs SET waits = json_set(coalesce(waits, '{}'),
--       '$.signals."approved"', json_object('payload', json('{"by":"ada"}'),
--       'at', (julianday('now') - 2440587.5) * 86400.0)),
--     state = CASE WHEN state = 'waiting' AND wait_on = 'approved'
--       THEN 'queued' ELSE state END,
--     run_at = CASE WHEN state = 'waiting' AND wait_on = 'approved'
--       THEN (julianday('now') - 2440587.5) * 86400.0 ELSE run_at END,
--     wake_at = CASE WHEN state = 'waiting' AND wait_on = 'approved'
--       THEN NULL ELSE wake_at END,
--     wait_on = CASE WHEN state = 'waiting' AND wait_on = 'approved'
--       THEN NULL ELSE wait_on END
--   WHERE id = 42 AND state IN ('queued', 'running', 'waiting')
--     AND json_type(waits, '$.signals."approved"') IS NULL
--     AND json_type(waits, '$.timeouts."approved"') IS NULL
--   RETURNING state;
ALTER TABLE jobs ADD COLUMN waits TEXT;
ALTER TABLE jobs ADD COLUMN wait_on TEXT;
ALTER TABLE jobs ADD COLUMN wake_at REAL;
CREATE INDEX jobs_wake ON jobs (wake_at) WHERE wake_at IS NOT NULL;
CREATE INDEX jobs_wait_on ON jobs (wait_on) WHERE wait_on IS NOT NULL;
-- migration 17
-- How many jobrunner.sql statements a job's success committed, for show
-- and the API: set only on a success that carried some and stays
-- completed; NULL for every other job, which pays nothing for it.
ALTER TABLE jobs ADD COLUMN sql_statements INTEGER;
-- migration 18
-- Sequences (docs/queues.md, "Sequences"): the jobs of one sequence key
-- run one at a time, in the order they were pushed. A job pushed into a
-- sequence waits (a dependency of migration 11) for the job pushed into
-- it just before, while that one has not ended, so the claim is the
-- plain one and a plain job pays nothing: these columns stay NULL.
-- sequence_key is the key; seq_no its place; seq_fail what the job
-- ending dead does to the jobs behind it: block (they wait for an
-- operator), skip (the next runs), dead (they end dead too).
ALTER TABLE jobs ADD COLUMN sequence_key TEXT
    CHECK (sequence_key IS NULL
           OR length(CAST(sequence_key AS BLOB)) BETWEEN 1 AND 256);
ALTER TABLE jobs ADD COLUMN seq_no INTEGER;
ALTER TABLE jobs ADD COLUMN seq_fail TEXT
    CHECK (seq_fail IS NULL OR seq_fail = 'block' OR seq_fail = 'skip'
           OR seq_fail = 'dead');
CREATE INDEX jobs_sequence ON jobs (sequence_key, seq_no)
    WHERE sequence_key IS NOT NULL;
-- Fair share inside a queue (docs/queues.md, "Fair share"): the weight
-- of a fair key set at run time (`jobrunner fair set`; NULL: the
-- config's) and its pass, what it has started weighted (1/weight a
-- start); the claim starts the key with the lowest pass next. A queue's
-- clock is the lowest pass of its keys with ready jobs: a key below it
-- (idle a while) starts from it. Rows only for fair queues.
CREATE TABLE fair_keys (
    queue  TEXT NOT NULL,
    key    TEXT NOT NULL,
    weight REAL CHECK (weight IS NULL OR (weight >= 1 AND weight <= 1000)),
    pass   REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, key)
) WITHOUT ROWID;
CREATE TABLE fair_clocks (
    queue TEXT PRIMARY KEY,
    clock REAL NOT NULL
) WITHOUT ROWID;
-- migration 19
-- Trace context (docs/tracing.md): the W3C traceparent a producer gave,
-- then, with a tracestate, one space and the tracestate. NULL for a job
-- pushed without one, which pays a NULL in the claim and nothing else.
ALTER TABLE jobs ADD COLUMN trace TEXT
    CHECK (trace IS NULL OR length(CAST(trace AS BLOB)) BETWEEN 55 AND 568);
-- migration 20
-- Each attempt's logs (docs/handlers.md, "Each attempt's logs"): what a
-- handler's jobrunner.log, print, io.write and io.stderr wrote in one run,
-- a JSON array of the newest 20 runs (JR_LOGS_KEPT), oldest first, each
-- {"attempt", "at", "lines": [{"at", "level", "msg"}, ...],
-- "dropped_lines", "dropped_bytes"}, appended in the transaction that
-- records the run's end. NULL for a job whose handler wrote nothing: a
-- job that logs nothing pays nothing. It goes with its row (retention).
ALTER TABLE jobs ADD COLUMN logs TEXT;
-- migration 21
-- Expiry and deadlines (docs/queues.md, "Expiry and deadlines").
-- expires_at: a job not started by then is never started: the claim
-- passes it over and the runner's sweep ends it in the final state
-- expired (a job that started once, then waits or is retried, is not
-- expired). deadline: seconds from the job's first start; deadline_at,
-- set by its first claim, bounds its retries: a retry due at or past it
-- is not scheduled, the job ends dead with 'deadline passed'. All three
-- stay NULL for a job pushed without them, which pays a NULL test.
ALTER TABLE jobs ADD COLUMN expires_at REAL
    CHECK (expires_at IS NULL OR expires_at BETWEEN 0 AND 253402300799);
ALTER TABLE jobs ADD COLUMN deadline REAL
    CHECK (deadline IS NULL OR (deadline > 0 AND deadline <= 3155760000));
ALTER TABLE jobs ADD COLUMN deadline_at REAL;
-- the sweep's: queued jobs with an expiry, by it
CREATE INDEX jobs_expiry ON jobs (expires_at)
    WHERE expires_at IS NOT NULL AND state = 'queued';
-- retention's, as for the other final states
CREATE INDEX jobs_expired ON jobs (finished_at) WHERE state = 'expired';
-- The state expired: SQLite cannot change a CHECK, and a rebuild would
-- copy every row; the CHECK of state is only widened, which no stored
-- row can break, so the table's text is edited in place (SQLite's
-- documented way for such a change; migrate.c bumps schema_version after
-- a block that does so).
PRAGMA writable_schema = ON;
UPDATE sqlite_master SET sql = replace(sql,
    'OR state = ''completed'' OR state = ''waiting'')',
    'OR state = ''completed'' OR state = ''waiting''
                        OR state = ''expired'')')
WHERE type = 'table' AND name = 'jobs';
PRAGMA writable_schema = OFF;
-- migration 22
-- Schedules managed at run time (docs/schedules.md, "Schedules managed
-- at run time"): one row per schedule added by `jobrunner schedule add`,
-- the library, the Lua module or the HTTP API, beside the config's. def
-- is the schedule's fields as a JSON object, as the config writes them
-- (cron or every, job, payload, queue, overlap, jitter, ...), checked by
-- the config's reader before it is written. schedule_defs_rev counts the
-- changes: each add, set and remove adds one in its transaction, and a
-- runner reads the rows again when the count moved.
CREATE TABLE schedule_defs (
    name       TEXT    PRIMARY KEY
               CHECK (length(name) BETWEEN 1 AND 128
                      AND name NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    def        TEXT    NOT NULL CHECK (length(def) BETWEEN 2 AND 1048576),
    created_at REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    updated_at REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0)
) WITHOUT ROWID;
CREATE TABLE schedule_defs_rev (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    rev INTEGER NOT NULL
);
INSERT INTO schedule_defs_rev (one, rev) VALUES (1, 0);
-- A fire pushed by `schedule backfill` (1): kept when the newest fires
-- are pruned, so that a second backfill of the window pushes nothing.
ALTER TABLE schedule_fires ADD COLUMN backfill INTEGER;
-- migration 23
-- Limits by cost (docs/limits.md, "Limits by cost"): a job's cost, the
-- tokens it takes from a rate's bucket and the slots of a concurrency
-- cap; NULL for a job pushed without one, which counts 1 and pays
-- nothing for it. limit_sizes: per limit of the config (a job name, or
-- "queue:NAME"), the most one job may cost (its smallest cap or
-- bucket) and what that is, written by the runner at start and by
-- migrate, read by a push with a cost: a cost over it is refused.
ALTER TABLE jobs ADD COLUMN cost INTEGER
    CHECK (cost IS NULL OR (cost >= 1 AND cost <= 1000000000));
CREATE TABLE limit_sizes (
    scope TEXT PRIMARY KEY,
    size  INTEGER NOT NULL,
    what  TEXT NOT NULL
) WITHOUT ROWID;
-- migration 24
-- Encrypted payloads stored as bytes (docs/operations.md, "Encryption"):
-- a payload sealed before its push, {"$jr_enc":"v1:ID:BASE64"}, is
-- stored as the stub {"$jr_enc":"v1:ID:sealed"} with the envelope's
-- bytes (BASE64 decoded) in sealed, a quarter smaller than the text in
-- the row that a claim and an end rewrite. The stub and its bytes read as
-- the envelope again; sealed is NULL for any other payload, and read
-- only beside a stub (a payload written since by other means leaves it
-- unread). Envelopes stored as text before stay, and read as before.
ALTER TABLE jobs ADD COLUMN sealed BLOB;
-- migration 25
-- Fair share inside a queue (docs/queues.md, "Fair share"): a job's
-- fair key, stamped when it is pushed into a queue listed in fair_paths
-- (written from the config by the runner at start and by migrate, with
-- the key's JSON path), so that a claim reaches each key's first ready
-- jobs through jobs_fair and walks the keys with ready jobs from the
-- queue's cursor (fair_clocks.cursor), the last key it started: keys
-- without queued jobs are in no index and cost nothing. A job of a queue
-- that is not fair keeps a NULL key, in no index; its push pays a look-up
-- in fair_paths (empty without fair queues).
ALTER TABLE jobs ADD COLUMN fair_key TEXT;
CREATE INDEX jobs_fair ON jobs (queue, fair_key, priority, run_at, id)
    WHERE state = 'queued' AND fair_key IS NOT NULL;
CREATE TABLE fair_paths (
    queue TEXT PRIMARY KEY,
    path  TEXT NOT NULL
) WITHOUT ROWID;
ALTER TABLE fair_clocks ADD COLUMN cursor TEXT;
CREATE TRIGGER jobs_fair_key AFTER INSERT ON jobs
    WHEN NEW.fair_key IS NULL
     AND EXISTS (SELECT 1 FROM fair_paths WHERE queue = NEW.queue)
BEGIN
    UPDATE jobs SET fair_key = (SELECT CASE WHEN json_valid(NEW.payload)
        THEN coalesce(CAST(json_extract(NEW.payload, f.path) AS TEXT), '')
        ELSE '' END FROM fair_paths f WHERE f.queue = NEW.queue)
    WHERE id = NEW.id;
END;
-- migration 26
-- Sequence as a handler option (docs/queues.md, "Sequences"): per job
-- name whose handler returns `sequence = "payload.PATH"`, PATH ("a.b"),
-- written by each runner from its handlers when it loads them, read by
-- every push: a job of the name pushed without a sequence (nor after, a
-- batch or a unique key) goes into the sequence its payload's value at
-- PATH names. A name whose handler has none has no row.
CREATE TABLE sequence_paths (
    name TEXT PRIMARY KEY,
    path TEXT NOT NULL CHECK (length(path) BETWEEN 1 AND 192)
) WITHOUT ROWID;
-- migration 29
-- Fair share keyed by a job name (docs/queues.md, "Fair share"): per job
-- name whose handler returns `fair = "payload.PATH"`, its JSON path
-- ("$.a.b"), written by each runner from its handlers when it loads
-- them. A job of the name pushed into a fair queue takes its key at that
-- path, over the queue's: jobs_fair_key (migration 25) reads it. A name
-- whose handler has none has no row; a push of another name pays one
-- look-up of its name in this (small) table, in a fair queue only.
CREATE TABLE fair_names (
    name TEXT PRIMARY KEY,
    path TEXT NOT NULL CHECK (length(path) BETWEEN 3 AND 194)
) WITHOUT ROWID;
DROP TRIGGER jobs_fair_key;
CREATE TRIGGER jobs_fair_key AFTER INSERT ON jobs
    WHEN NEW.fair_key IS NULL
     AND EXISTS (SELECT 1 FROM fair_paths WHERE queue = NEW.queue)
BEGIN
    UPDATE jobs SET fair_key = (SELECT CASE WHEN json_valid(NEW.payload)
        THEN coalesce(CAST(json_extract(NEW.payload, coalesce(
            (SELECT n.path FROM fair_names n WHERE n.name = NEW.name),
            f.path)) AS TEXT), '')
        ELSE '' END FROM fair_paths f WHERE f.queue = NEW.queue)
    WHERE id = NEW.id;
END;
-- migration 30
-- Fair share by start tags (docs/queues.md, "Fair share"): each queued
-- job of a fair queue has a tag, max(its key's finish, the queue's
-- clock) when it was given, and its key's finish (fair_keys.pass) moves
-- on by 1/weight; the claim takes a fair queue's jobs in (priority, tag,
-- id) order through jobs_fairtag, one range scan, and moves the clock
-- (fair_clocks.clock) to the tags it took. A push tags its jobs; a job
-- that goes back to queued (a retry, a rerun, a readied flow child) or
-- was pushed by another program has no tag until the next claim of its
-- queue gives it one (jobs_fairnew). fair_keys.cweight is the weight the
-- config gives the key, fair_paths.weights and wdefault the config's
-- weights and default as the runner last recorded them: a push outside
-- the runner reads them; jobs.fair_w the weight the job was tagged with
-- (the runner deals its local queue by it). The walk's jobs_fair and
-- cursor go.
ALTER TABLE jobs ADD COLUMN fair_tag REAL;
ALTER TABLE jobs ADD COLUMN fair_w REAL;
ALTER TABLE fair_keys ADD COLUMN cweight REAL;
ALTER TABLE fair_paths ADD COLUMN weights TEXT;
ALTER TABLE fair_paths ADD COLUMN wdefault REAL;
DROP INDEX jobs_fair;
CREATE INDEX jobs_fairtag ON jobs (queue, priority, fair_tag, id)
    WHERE state = 'queued' AND fair_tag IS NOT NULL;
CREATE INDEX jobs_fairnew ON jobs (queue, id)
    WHERE state = 'queued' AND fair_key IS NOT NULL AND fair_tag IS NULL;
-- migration 31
-- A job name's own fair share (docs/queues.md, "A name's own weights"):
-- a handler's `fair = { key = "payload.PATH", weights = {...}, default
-- = N }` puts its weights (a JSON object) and default beside its path,
-- and its jobs' keys in a scope of their own: NAME, char(31), the value
-- at PATH, so one name's acme is not another's nor the queue's. Weights
-- set at run time (`jobrunner fair set --name`) go in fair_name_keys,
-- over the handler's. A push of such a name into a queue that is not
-- fair makes the queue fair (a fair_paths row with the path '': the
-- other names' jobs have the key '', and take turns as one key) and
-- keys its jobs not ended (jobs_fair_name).
ALTER TABLE fair_names ADD COLUMN weights TEXT;
ALTER TABLE fair_names ADD COLUMN dflt REAL;
CREATE TABLE fair_name_keys (
    name   TEXT NOT NULL,
    key    TEXT NOT NULL,
    weight REAL NOT NULL CHECK (weight BETWEEN 1 AND 1000),
    PRIMARY KEY (name, key)
) WITHOUT ROWID;
DROP TRIGGER jobs_fair_key;
CREATE TRIGGER jobs_fair_key AFTER INSERT ON jobs
    WHEN NEW.fair_key IS NULL
     AND EXISTS (SELECT 1 FROM fair_paths WHERE queue = NEW.queue)
BEGIN
    UPDATE jobs SET fair_key = (SELECT CASE WHEN json_valid(NEW.payload)
        THEN coalesce((SELECT CASE WHEN n.weights IS NOT NULL
            THEN NEW.name || char(31) ELSE '' END || coalesce(CAST(
            json_extract(NEW.payload, n.path) AS TEXT), '')
            FROM fair_names n WHERE n.name = NEW.name),
            CASE WHEN f.path = '' THEN '' ELSE coalesce(CAST(
            json_extract(NEW.payload, f.path) AS TEXT), '') END)
        ELSE '' END FROM fair_paths f WHERE f.queue = NEW.queue)
    WHERE id = NEW.id;
END;
CREATE TRIGGER jobs_fair_name AFTER INSERT ON jobs
    WHEN NEW.fair_key IS NULL
     AND NOT EXISTS (SELECT 1 FROM fair_paths WHERE queue = NEW.queue)
     AND EXISTS (SELECT 1 FROM fair_names WHERE name = NEW.name
                 AND weights IS NOT NULL)
BEGIN
    INSERT INTO fair_paths (queue, path) VALUES (NEW.queue, '')
        ON CONFLICT DO NOTHING;
    UPDATE jobs SET fair_key = CASE WHEN json_valid(payload)
        THEN coalesce((SELECT CASE WHEN n.weights IS NOT NULL
            THEN jobs.name || char(31) ELSE '' END || coalesce(CAST(
            json_extract(payload, n.path) AS TEXT), '')
            FROM fair_names n WHERE n.name = jobs.name), '')
        ELSE '' END
    WHERE queue = NEW.queue
      AND state NOT IN ('completed', 'dead', 'cancelled', 'expired');
END;
-- migration 35
-- The partial indexes a plain job is in none of test their feature's
-- column first: a claim and an end test each such index's condition on
-- the row before and after (state is in each), and a plain job's row
-- then fails at its first term (no cancel asked, no fair key) instead of
-- after state's. The same rows, columns and uses.
DROP INDEX jobs_cancel;
CREATE INDEX jobs_cancel ON jobs (locked_by)
    WHERE cancel_requested = 1 AND state = 'running';
DROP INDEX jobs_fairtag;
CREATE INDEX jobs_fairtag ON jobs (queue, priority, fair_tag, id)
    WHERE fair_tag IS NOT NULL AND state = 'queued';
DROP INDEX jobs_fairnew;
CREATE INDEX jobs_fairnew ON jobs (queue, id)
    WHERE fair_key IS NOT NULL AND fair_tag IS NULL AND state = 'queued';
-- migration 36
-- Sequences (docs/queues.md, "Sequences"): jobs_sequence, an entry a
-- job of a sequence, gives way to jobs_seq_head, an entry a sequence
-- while it drains: the jobs that wait for none before them (its head,
-- queued, running, or dead blocking it; the ended ones kept) and the one
-- pushed into it last, seq_last 1 (the push moves it). A batch's deletes
-- of the heads of as many sequences put one in each page of an index of
-- every job; they stay in the few pages of this one, which a claim
-- (state alone) leaves as it is. The waiting jobs between a head and the
-- last are found by their waits' edges (job_deps).
ALTER TABLE jobs ADD COLUMN seq_last INTEGER
    CHECK (seq_last IS NULL OR seq_last = 1);
UPDATE jobs SET seq_last = 1 WHERE id IN (SELECT (SELECT l.id FROM jobs l
    WHERE l.sequence_key = k.sequence_key ORDER BY l.seq_no DESC LIMIT 1)
    FROM (SELECT DISTINCT sequence_key FROM jobs
          WHERE sequence_key IS NOT NULL) k);
DROP INDEX jobs_sequence;
CREATE INDEX jobs_seq_head ON jobs (sequence_key, seq_no)
    WHERE sequence_key IS NOT NULL AND (parents_left = 0 OR seq_last = 1);
-- migration 37
-- A fair key's value as PostgreSQL's #>> gives it (docs/queues.md, "Fair
-- share"): json_extract gives JSON true and false as 1 and 0, so a job
-- keyed true took its turns under the key "1" with the number 1; they
-- are the words "true" and "false" now. A key's value is capped at its
-- first 512 characters, as on PostgreSQL (where an index entry holds no
-- longer one). The triggers of migration 31 with that value
-- (sqlite_int.h's JR_SQLITE_FAIR_VAL spells it for the library's
-- statements); the jobs keyed before keep their keys.
DROP TRIGGER jobs_fair_key;
CREATE TRIGGER jobs_fair_key AFTER INSERT ON jobs
    WHEN NEW.fair_key IS NULL
     AND EXISTS (SELECT 1 FROM fair_paths WHERE queue = NEW.queue)
BEGIN
    UPDATE jobs SET fair_key = (SELECT CASE WHEN json_valid(NEW.payload)
        THEN coalesce((SELECT CASE WHEN n.weights IS NOT NULL
            THEN NEW.name || char(31) ELSE '' END || substr(CASE
            json_type(NEW.payload, n.path) WHEN 'true' THEN 'true'
            WHEN 'false' THEN 'false' ELSE coalesce(CAST(
            json_extract(NEW.payload, n.path) AS TEXT), '') END, 1, 512)
            FROM fair_names n WHERE n.name = NEW.name),
            CASE WHEN f.path = '' THEN '' ELSE substr(CASE
            json_type(NEW.payload, f.path) WHEN 'true' THEN 'true'
            WHEN 'false' THEN 'false' ELSE coalesce(CAST(
            json_extract(NEW.payload, f.path) AS TEXT), '') END, 1, 512)
            END)
        ELSE '' END FROM fair_paths f WHERE f.queue = NEW.queue)
    WHERE id = NEW.id;
END;
DROP TRIGGER jobs_fair_name;
CREATE TRIGGER jobs_fair_name AFTER INSERT ON jobs
    WHEN NEW.fair_key IS NULL
     AND NOT EXISTS (SELECT 1 FROM fair_paths WHERE queue = NEW.queue)
     AND EXISTS (SELECT 1 FROM fair_names WHERE name = NEW.name
                 AND weights IS NOT NULL)
BEGIN
    INSERT INTO fair_paths (queue, path) VALUES (NEW.queue, '')
        ON CONFLICT DO NOTHING;
    UPDATE jobs SET fair_key = CASE WHEN json_valid(payload)
        THEN coalesce((SELECT CASE WHEN n.weights IS NOT NULL
            THEN jobs.name || char(31) ELSE '' END || substr(CASE
            json_type(payload, n.path) WHEN 'true' THEN 'true'
            WHEN 'false' THEN 'false' ELSE coalesce(CAST(
            json_extract(payload, n.path) AS TEXT), '') END, 1, 512)
            FROM fair_names n WHERE n.name = jobs.name), '')
        ELSE '' END
    WHERE queue = NEW.queue
      AND state NOT IN ('completed', 'dead', 'cancelled', 'expired');
END;
-- migration 38
-- A job not yet due takes no turn of its key (docs/queues.md, "Fair
-- share"): a push tags only its jobs due by then, and a claim tags its
-- queue's untagged jobs once due, each key from the queue's clock then,
-- so a key's jobs pushed to run later neither move its finish ahead of
-- its job due now nor, once due, start ahead of keys that waited.
-- jobs_fairnew, an entry an untagged job, is ordered by run_at for that
-- tagging: the due ones one range, however many wait for later (by id
-- it read them all, a million scheduled jobs, at every claim). A queued
-- job tagged before while not yet due (at its push, or by a claim) gives
-- its tag back, to be tagged once due; its key's finish stays where that
-- tag moved it.
DROP INDEX jobs_fairnew;
CREATE INDEX jobs_fairnew ON jobs (queue, run_at, id)
    WHERE fair_key IS NOT NULL AND fair_tag IS NULL AND state = 'queued';
UPDATE jobs SET fair_tag = NULL, fair_w = NULL
    WHERE fair_tag IS NOT NULL AND state = 'queued'
      AND run_at > (julianday('now') - 2440587.5) * 86400.0;
-- migration 39
-- A fair key alike on both engines for the same payload, and a queue's
-- own key that cannot pose as a job name's (docs/queues.md, "Fair
-- share"): the value at the path (each step a field, as json_extract
-- reads "$.a.0": PostgreSQL's took 0 as an index into an array) is a
-- string as it is, true and false as the words, a number by its value
-- (an integer as its digits: 1e3, 1000 and 1000.0 are "1000", where
-- json_extract's real gave "1000.0"; another as %.16g writes it), else
-- (null, missing, an object, an array) ''; a key in a queue's scope that
-- holds a char(31) has one put in front, so it never spells a name's
-- scope (NAME, char(31), value: a name starts with none). A key's tags
-- are from a base on (fair_keys.base, the queue's clock when the key last
-- started from it): its n-th job since is base + n / weight (tw), one
-- formula for a push alone, a batch and a claim's tagging (fair.c), so
-- the same jobs get the same tags bit for bit; the finish (pass) is base
-- + n / tw. fair_key_of is a job's key, as sqlite_int.h's
-- JR_SQLITE_FAIR_NKEY and JR_SQLITE_FAIR_QKEY spell it for the
-- library's statements: the triggers of migration 37 with it, and the
-- keys of the jobs not ended stamped again (a queued one whose key
-- changed gives its tag back, to be tagged by its queue's next claim).
ALTER TABLE fair_keys ADD COLUMN base REAL;
ALTER TABLE fair_keys ADD COLUMN n INTEGER NOT NULL DEFAULT 0;
ALTER TABLE fair_keys ADD COLUMN tw REAL;
UPDATE fair_keys SET base = pass;
CREATE VIEW fair_key_of AS
SELECT id, CASE WHEN NOT json_valid(payload) THEN ''
    WHEN weights IS NOT NULL THEN name || char(31) || v
    WHEN instr(v, char(31)) THEN char(31) || v ELSE v END AS key
FROM (SELECT j.id, j.payload, j.name, n.weights,
          CASE WHEN NOT json_valid(j.payload)
                 OR (n.path IS NULL AND f.path = '') THEN ''
          ELSE (SELECT substr(CASE t WHEN 'text' THEN x
                    WHEN 'true' THEN 'true' WHEN 'false' THEN 'false'
                    WHEN 'integer' THEN CASE WHEN x = CAST(x AS INTEGER)
                        THEN CAST(CAST(x AS INTEGER) AS TEXT)
                        ELSE printf('%.16g', x) END
                    WHEN 'real' THEN CASE WHEN x = CAST(x AS INTEGER)
                        THEN CAST(CAST(x AS INTEGER) AS TEXT)
                        ELSE printf('%.16g', x) END
                    ELSE '' END, 1, 512)
                FROM (SELECT json_type(j.payload, p) AS t,
                             json_extract(j.payload, p) AS x
                      FROM (SELECT coalesce(n.path, f.path) AS p)))
          END AS v
      FROM jobs j JOIN fair_paths f ON f.queue = j.queue
      LEFT JOIN fair_names n ON n.name = j.name);
DROP TRIGGER jobs_fair_key;
CREATE TRIGGER jobs_fair_key AFTER INSERT ON jobs
    WHEN NEW.fair_key IS NULL
     AND EXISTS (SELECT 1 FROM fair_paths WHERE queue = NEW.queue)
BEGIN
    UPDATE jobs SET fair_key = (SELECT key FROM fair_key_of WHERE id = NEW.id)
    WHERE id = NEW.id;
END;
DROP TRIGGER jobs_fair_name;
CREATE TRIGGER jobs_fair_name AFTER INSERT ON jobs
    WHEN NEW.fair_key IS NULL
     AND NOT EXISTS (SELECT 1 FROM fair_paths WHERE queue = NEW.queue)
     AND EXISTS (SELECT 1 FROM fair_names WHERE name = NEW.name
                 AND weights IS NOT NULL)
BEGIN
    INSERT INTO fair_paths (queue, path) VALUES (NEW.queue, '')
        ON CONFLICT DO NOTHING;
    UPDATE jobs SET fair_key = (SELECT key FROM fair_key_of k
                                WHERE k.id = jobs.id)
    WHERE queue = NEW.queue
      AND state NOT IN ('completed', 'dead', 'cancelled', 'expired');
END;
UPDATE jobs SET fair_key = x.key,
    fair_tag = CASE WHEN state = 'queued' THEN NULL ELSE fair_tag END,
    fair_w = CASE WHEN state = 'queued' THEN NULL ELSE fair_w END
FROM (SELECT k.id, k.key FROM fair_key_of k JOIN jobs o ON o.id = k.id
      WHERE o.fair_key IS NOT NULL
        AND o.state NOT IN ('completed', 'dead', 'cancelled', 'expired')) x
WHERE jobs.id = x.id AND jobs.fair_key IS NOT x.key;
-- migration 40
-- Nothing on SQLite: PostgreSQL's 40 keys and tags a replaced fair job
-- again in its push functions (push_keyed, sequence_put); here the
-- library does it (fairreplace.c). Kept so that a schema number means
-- the same on both engines.
-- migration 41
-- A limit key alike on both engines for the same payload (docs/limits.md,
-- "The limit key"): the value at the limit's path by the fair key's rules
-- (push.c's LIMIT_KEY_OF with sqlite_int.h's JR_SQLITE_FAIR_NUM), a string
-- as it is, a number by its value (an integer as its digits: 1e3, 1000
-- and 1000.0 are "1000", where json_extract's real gave "1000.0";
-- another as %.16g writes it); anything else (true, false, null, an
-- object, an array, missing) or a text not of 1 to 256 bytes leaves the
-- job unkeyed, as before. A key given at push is kept as given. Only a
-- number's key changes here: the jobs not ended whose stored key is what
-- the old rule took from their payload's number take the new rule's (a
-- key given at push that happens to equal it cannot be told from one
-- taken, and is taken for one); an unkeyed job stays unkeyed, as does
-- one whose key differs from its payload's.
UPDATE jobs SET limit_key = x.key
FROM (SELECT o.id, CASE WHEN x = CAST(x AS INTEGER)
          THEN CAST(CAST(x AS INTEGER) AS TEXT)
          ELSE printf('%.16g', x) END AS key
      FROM (SELECT j.id, json_extract(j.payload, '$.' || lp.path) AS x
            FROM jobs j JOIN limit_paths lp ON lp.name = j.name
            WHERE j.state IN ('queued', 'running', 'waiting')
              AND json_valid(j.payload)
              AND json_type(j.payload, '$.' || lp.path)
                  IN ('integer', 'real')
              AND j.limit_key
                  = CAST(json_extract(j.payload, '$.' || lp.path) AS TEXT)) o
     ) x
WHERE jobs.id = x.id AND jobs.limit_key IS NOT x.key;
-- migration 42
-- A job put to wait behind its sequence takes no turn of its fair key
-- (docs/queues.md, "Fair share", "Sequences"): the library gives its
-- turn back and drops its tag (sequence.c). Waiting jobs tagged by a
-- push before drop their tags here (their turns stay spent: later ones
-- of their keys follow them); they are tagged once queued, as before.
UPDATE jobs SET fair_tag = NULL, fair_w = NULL
    WHERE state = 'waiting' AND fair_tag IS NOT NULL;
-- migration 43
-- A job's name and queue are text without a NUL byte, from plain SQL
-- too: a BLOB passed the CHECKs (GLOB and length read it as text), and
-- so did the bytes after a NUL (GLOB and length stop at it); such a job
-- was stored and never claimed, with nothing said. Refused on an insert
-- and on an update that sets them (the library's own pushes keep the
-- rule themselves, as the other triggers': conn.c). PostgreSQL's 43
-- checks the characters once a distinct pair of an insert statement
-- (its text holds no NUL, and a bytea is no text).
CREATE TRIGGER jobs_names_ok BEFORE INSERT ON jobs
    WHEN typeof(NEW.name) = 'blob' OR typeof(NEW.queue) = 'blob'
     OR instr(NEW.name, char(0)) > 0 OR instr(NEW.queue, char(0)) > 0
BEGIN
    SELECT RAISE(ABORT, 'jobs_names_ok: a job''s name and queue are text of A-Z a-z 0-9 _ . : - (not a BLOB, no NUL byte)');
END;
CREATE TRIGGER jobs_names_moved BEFORE UPDATE OF name, queue ON jobs
    WHEN typeof(NEW.name) = 'blob' OR typeof(NEW.queue) = 'blob'
     OR instr(NEW.name, char(0)) > 0 OR instr(NEW.queue, char(0)) > 0
BEGIN
    SELECT RAISE(ABORT, 'jobs_names_ok: a job''s name and queue are text of A-Z a-z 0-9 _ . : - (not a BLOB, no NUL byte)');
END;
-- migration 44
-- Fewer indexes for a plain job's claim and end to keep (docs/
-- performance.md, "What features cost"). SQLite opens and tests at each
-- UPDATE every index that names a column the UPDATE sets, and at each
-- DELETE every index; the claim sets state and locked_by, so each index
-- whose condition or columns read them was opened and tested twice per
-- claimed job although a plain job is in none of them. The ended states'
-- four indexes become one keyed by state and one for the dead, and the
-- expiry and cancel indexes test only their feature's column, so the
-- claim's UPDATE opens 8 indexes where it opened 11 and the success's
-- DELETE 14 where it opened 16. The same queries use them: a prune's
-- "state = 'completed' AND finished_at < ?" implies finished_at IS NOT
-- NULL, a runner's cancel poll seeks its token, the expiry sweep seeks
-- state 'queued'. A dead job carries died_at (the runner's ends set it;
-- `dead list`, `dead retry --all` and the prune read it): the dead rows
-- plain SQL left without one die now (kept a retention from here, as
-- they were never pruned before), and the triggers jobs_died_at and _set
-- give one to the rows plain SQL makes dead from now on: an INSERT's
-- finished_at, else its updated_at (the insert's time unless given); an
-- UPDATE's finished_at or updated_at when it sets them, else the time
-- now (not the updated_at the row had: a job queued days before and made
-- dead by hand would be pruned at once). The library sets died_at itself
-- and runs without them (conn.c).
UPDATE jobs SET died_at = (julianday('now') - 2440587.5) * 86400.0
    WHERE state = 'dead' AND died_at IS NULL;
CREATE TRIGGER jobs_died_at AFTER INSERT ON jobs
    WHEN NEW.state = 'dead' AND NEW.died_at IS NULL
BEGIN
    UPDATE jobs SET died_at = coalesce(NEW.finished_at, NEW.updated_at)
    WHERE id = NEW.id;
END;
CREATE TRIGGER jobs_died_at_set AFTER UPDATE OF state, died_at ON jobs
    WHEN NEW.state = 'dead' AND NEW.died_at IS NULL
BEGIN
    UPDATE jobs SET died_at = coalesce(
        CASE WHEN NEW.finished_at IS NOT OLD.finished_at
             THEN NEW.finished_at END,
        CASE WHEN NEW.updated_at IS NOT OLD.updated_at
             THEN NEW.updated_at END,
        (julianday('now') - 2440587.5) * 86400.0)
    WHERE id = NEW.id;
END;
DROP INDEX jobs_dead;
DROP INDEX jobs_completed;
DROP INDEX jobs_cancelled;
DROP INDEX jobs_expired;
DROP INDEX jobs_expiry;
DROP INDEX jobs_cancel;
CREATE INDEX jobs_ended ON jobs (state, finished_at)
    WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_died ON jobs (died_at) WHERE died_at IS NOT NULL;
CREATE INDEX jobs_expiry ON jobs (state, expires_at)
    WHERE expires_at IS NOT NULL;
CREATE INDEX jobs_cancel ON jobs (locked_by) WHERE cancel_requested = 1;
-- migration 45
-- One claim index for plain and fair queues (docs/performance.md, "What
-- features cost"): jobs_claim orders a queue's queued jobs by (priority,
-- coalesce(fair_tag, run_at), id). A plain queue's jobs have no tag, so
-- its order is (priority, run_at, id) as before; a fair queue's tagged
-- jobs are in start-tag order, which jobs_fairtag held apart, and its
-- untagged ones (not yet due: a tag is a small virtual time, run_at an
-- epoch time) after them. A fair job was an entry of both indexes, found
-- and deleted in each by its claim and written in each by its push; it is
-- one entry now, as a plain job is. The claims order by the same
-- expression (claim.c, candidates.c, aging.c, fair.c, fairclaim.c).
DROP INDEX jobs_fairtag;
DROP INDEX jobs_claim;
CREATE INDEX jobs_claim ON jobs (queue, priority, coalesce(fair_tag, run_at), id)
    WHERE state = 'queued';
