-- pghold.lua - a second PostgreSQL session for race specs, so that a race
-- between two sessions happens the same way every time, with no timing:
-- it runs some SQL in a transaction, waits until another session is
-- blocked on its locks, then runs the rest and commits.
--
--   local hold = pghold.start(env, { "SELECT ... FOR UPDATE" }, { "DELETE ..." })
--   env:cli(...)                    -- blocks on the held row, then goes on
--   local code, err = pghold.finish(hold)
local jr = require "jr"

local M = {}

-- Waits (60 s at most) until a session waits on a lock this one holds.
local WAIT = [[DO $$ DECLARE t timestamptz := clock_timestamp(); BEGIN
  WHILE NOT EXISTS (SELECT 1 FROM pg_locks l WHERE NOT l.granted
                    AND pg_backend_pid() = ANY (pg_blocking_pids(l.pid))) LOOP
    IF clock_timestamp() > t + interval '60 seconds' THEN
      RAISE EXCEPTION 'pghold: no session waited on this one';
    END IF;
    PERFORM pg_sleep(0.02);
  END LOOP; END $$]]

local function psql_args(url, sqls)
  local args = { "psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", jr.quote(url) }
  for _, sql in ipairs(sqls) do
    args[#args + 1] = "-c"
    args[#args + 1] = jr.quote(sql)
  end
  return table.concat(args, " ")
end

-- Starts the session on env's schema: BEGIN, the statements of before,
-- then waits for a blocked session, then after, COMMIT. Returns once it
-- waits (before done); the handle goes to finish().
function M.start(env, before, after)
  local tag = ("pghold_%d"):format(math.random(1, 1e9))
  local sqls = { "SET search_path TO " .. env.schema, "BEGIN" }
  for _, s in ipairs(before) do sqls[#sqls + 1] = s end
  sqls[#sqls + 1] = WAIT
  for _, s in ipairs(after or {}) do sqls[#sqls + 1] = s end
  sqls[#sqls + 1] = "COMMIT"
  local h = { status = env.dir .. "/" .. tag .. ".status", err = env.dir .. "/" .. tag .. ".err" }
  local cmd = psql_args(jr.pg_url .. "&application_name=" .. tag, sqls) ..
    " >/dev/null 2>" .. jr.quote(h.err) .. "; echo $? > " .. jr.quote(h.status)
  os.execute(("sh -c %s >/dev/null 2>&1 &"):format(jr.quote(cmd)))
  jr.wait_for(function()
    local out = jr.sh(psql_args(jr.pg_url, { ("SELECT count(*) FROM pg_stat_activity"
      .. " WHERE application_name = '%s' AND query LIKE 'DO $$%%'"):format(tag) }))
    return out:match("%d+") == "1" or jr.read_file(h.status)
  end, 30, "pghold: the holding session")
  assert(not jr.read_file(h.status), "pghold: " .. (jr.read_file(h.err) or ""))
  return h
end

-- Waits for the session to end; returns its psql exit status and stderr.
function M.finish(h)
  local s = jr.wait_for(function()
    return (jr.read_file(h.status) or ""):match("%d+")
  end, 90, "pghold: the holding session's end")
  return tonumber(s), jr.read_file(h.err) or ""
end

return M
