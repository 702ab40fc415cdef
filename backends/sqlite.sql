-- sqlite.sql - the SQLite schema, as numbered migrations. Each block after a
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
-- The push rules of the runtime (jr_push_check, README "Push rules") for
-- plain-SQL producers too: run_at must be a finite number of epoch seconds
-- (an infinite one would never run, NaN arrives as NULL).
CREATE TRIGGER jobs_run_at_check BEFORE INSERT ON jobs
WHEN typeof(NEW.run_at) NOT IN ('real', 'integer')
     OR abs(NEW.run_at) > 253402300799
BEGIN
    SELECT RAISE(ABORT, 'run_at must be finite epoch seconds, at most 253402300799 (9999-12-31)');
END;
