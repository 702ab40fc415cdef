-- migration7_spec.lua - SQLite's migration 7 rebuilds the jobs table with
-- cheaper checks of the same rules (for faster batch pushes): a schema-6
-- database with jobs in every state is brought forward by `jobrunner
-- migrate` with every row, id and the AUTOINCREMENT sequence intact, and
-- the table still refuses what it refused (plain-SQL producers) and still
-- makes new queues known. The schema-6 database is made from the first six
-- blocks of backends/sqlite/schema.sql with the sqlite3 client.
local jr = require "jr"

local NOW = "((julianday('now') - 2440587.5) * 86400.0)"

-- Jobs as a schema-6 runner left them: ready, scheduled, running (with
-- progress and a cancel requested), dead, cancelled, completed, with and
-- without unique and limit keys; the newest job deleted, so the sequence
-- is above every id.
local function old_jobs(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, priority, state, run_at,
                      attempts, max_retries, last_error, generation,
                      died_at, locked_by, locked_until, started_at,
                      finished_at, progress_done, progress_total,
                      progress_note, cancel_requested, unique_key, limit_key)
    VALUES
      ('m7.ok', '{"n": 1}', 'default', 0, 'queued', %s - 60, 0, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0,
       'u1', NULL),
      ('m7.ok', '{"n": 2}', 'mail', 3, 'queued', %s + 3600, 1, 5, 'boom',
       'g1', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, 'acct'),
      ('m7.ok', '{"n": 3}', 'default', 0, 'running', %s - 60, 1, NULL,
       NULL, NULL, NULL, 'runner-x', %s + 3600, %s - 5, NULL, 1.5, 4,
       'step', 1, 'u3', 'acct'),
      ('m7.ok', '{"n": 4}', 'default', 0, 'dead', %s - 60, 4, 3, 'gave up',
       'g2', %s - 10, NULL, NULL, %s - 20, %s - 10, NULL, NULL, NULL, 0,
       'u4', NULL),
      ('m7.ok', '{"n": 5}', 'default', 0, 'cancelled', %s - 60, 1, NULL,
       'cancelled', NULL, NULL, NULL, NULL, NULL, %s - 1, NULL, NULL, NULL,
       0, NULL, NULL),
      ('m7.ok', '{"n": 6, "s": "é"}', 'default', -2, 'completed', %s - 60,
       1, NULL, NULL, 'g3', NULL, NULL, NULL, %s - 2, %s - 1, 2, 2, 'done',
       0, NULL, NULL),
      ('m7.gone', '{}', 'default', 0, 'queued', %s, 0, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL);
    DELETE FROM jobs WHERE name = 'm7.gone';
  ]]):format(NOW, NOW, NOW, NOW, NOW, NOW, NOW, NOW, NOW, NOW, NOW, NOW,
             NOW, NOW, NOW, NOW))
end

local function objects(env)
  local t = {}
  -- (migration 8 drops jobs_locked_by, 44 the ended states' indexes
  -- and jobs_expiry's and jobs_cancel's first forms: migrate brings the
  -- table to the newest schema)
  for _, r in ipairs(env:query("SELECT type, name FROM sqlite_master " ..
      "WHERE tbl_name = 'jobs' AND name NOT IN ('jobs_locked_by', 'jobs_dead'," ..
      " 'jobs_completed', 'jobs_cancelled') ORDER BY name")) do
    t[#t + 1] = r.type .. " " .. r.name
  end
  return t
end

describe("sqlite: migration 7 (cheaper insert checks)", function()
  local env
  before_each(function() env = jr.env("sqlite") end)
  after_each(function() env:cleanup() end)

  it("upgrades a schema-6 database with every job, id and the id sequence intact", function()
    jr.make_schema(env, 6)
    old_jobs(env)
    local rows = env:query("SELECT * FROM jobs ORDER BY id")
    local seq = env:query("SELECT seq FROM sqlite_sequence WHERE name = 'jobs'")[1].seq
    local objs = objects(env)
    assert.equal(6, #rows)
    assert.equal(7, seq)
    local out, err, code = env:cli("migrate")
    assert.are.equal(0, code, out .. err)
    assert.is_true(env:query("PRAGMA user_version")[1].user_version >= 7)
    -- the columns schema 6 had, as they were (later migrations add some)
    local after = env:query("SELECT * FROM jobs ORDER BY id")
    for i, r in ipairs(after) do
      for k in pairs(r) do
        if rows[i] and rows[i][k] == nil then r[k] = nil end
      end
    end
    assert.are.same(rows, after)
    assert.equal(seq, env:query("SELECT seq FROM sqlite_sequence WHERE name = 'jobs'")[1].seq)
    -- its indexes and triggers, as they were (later migrations add some)
    local now = {}
    for _, o in ipairs(objects(env)) do now[o] = true end
    for _, o in ipairs(objs) do assert.is_true(now[o] ~= nil, o) end
    assert.equal("ok", env:query("PRAGMA integrity_check")[1].integrity_check)
    -- ids go on above every id ever given, the deleted one's included
    local id = env:push("m7.ok", '{"n": 8}')
    assert.equal(seq + 1, id)
    -- the unique index still holds the queued and running keys
    assert.has_error(function()
      env:exec("INSERT INTO jobs (name, unique_key) VALUES ('m7.ok', 'u3')")
    end)
    -- and the runner claims from the rebuilt table
    env:script("m7.ok", "return function() end")
    env:start()
    jr.wait_for(function() return env:job(1) == nil and env:job(id) == nil end,
      20, "old and new jobs run")
    assert.equal("running", env:job(3).state)
    assert.equal(0, env:stop())
  end)

  it("still refuses bad plain-SQL inserts and makes new queues known", function()
    local out, err, code = env:cli("migrate")
    assert.are.equal(0, code, out .. err)
    for _, bad in ipairs({
      "(name, state) VALUES ('ok', 'bogus')",
      "(name, state) VALUES ('ok', 'QUEUED')",
      "(name) VALUES ('bad name')",
      "(name) VALUES ('')",
      "(name, queue) VALUES ('ok', 'a/b')",
      "(name, payload) VALUES ('ok', '{')",
      "(name, run_at) VALUES ('ok', 'soon')",
      "(name, run_at) VALUES ('ok', 1e300)",
      "(name, max_retries) VALUES ('ok', -1)",
      "(name, cancel_requested) VALUES ('ok', 2)",
      "(name, unique_key) VALUES ('ok', '')",
      "(name, limit_key) VALUES ('ok', '')",
    }) do
      assert.has_error(function() env:exec("INSERT INTO jobs " .. bad) end, nil, bad)
    end
    assert.equal(0, env:count())
    for _, state in ipairs({ "queued", "running", "dead", "cancelled", "completed" }) do
      env:exec(("INSERT INTO jobs (name, state, queue) VALUES ('ok', '%s', 'q_%s')"):format(state, state))
    end
    assert.equal(5, env:count())
    env:exec("UPDATE jobs SET queue = 'moved' WHERE state = 'dead'")
    local names = {}
    for _, r in ipairs(env:query("SELECT name FROM queues ORDER BY name")) do
      names[#names + 1] = r.name
    end
    assert.are.same({ "moved", "q_cancelled", "q_completed", "q_dead",
                      "q_queued", "q_running" }, names)
  end)
end)
