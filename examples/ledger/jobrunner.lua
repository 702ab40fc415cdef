-- examples/ledger/jobrunner.lua - a ledger and a counter written with
-- each job's success (jobrunner.sql): every job adds one row keyed by its
-- id and adds its amount to a counter, in the transaction that records
-- the job's end. A runner killed at any moment leaves each job's row once
-- or not at all; the job then runs again. Run from this directory:
--
--   sqlite3 ledger.db < schema.sql        # the application's tables
--   jobrunner run &                       # the runner
--   for i in $(seq 100); do jobrunner push ledger.add '{"cents": 5}'; done
--   sqlite3 ledger.db 'SELECT count(*), sum(cents) FROM ledger;
--                      SELECT * FROM counter'
--
-- On PostgreSQL, create the tables of schema.sql in a schema of the
-- application's, name them with it in scripts/ledger/add.lua, and set
-- handler_role to a role that may write only them.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
return {
  backend = "sqlite:ledger.db",
  scripts = here .. "scripts",
  concurrency = 2,
}
