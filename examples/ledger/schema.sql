-- The application's tables, beside the queue's in ledger.db.
CREATE TABLE IF NOT EXISTS ledger (job INTEGER PRIMARY KEY, cents INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS counter (name TEXT PRIMARY KEY, n INTEGER NOT NULL, cents INTEGER NOT NULL);
INSERT OR IGNORE INTO counter VALUES ('total', 0, 0);
