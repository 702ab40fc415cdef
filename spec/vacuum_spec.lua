-- vacuum_spec.lua - a PostgreSQL runner vacuums its jobs table after every
-- `vacuum_every` jobs it finished (the dead entries of claimed and
-- finished jobs would slow every claim until autovacuum's next round), on
-- a connection of its own; `vacuum_every = 0` leaves it to autovacuum.
-- Dead rows other sessions left (a bulk delete, runners that stopped
-- before vacuum_every) count too: the runner asks the server's count at
-- its start and every 10 s, and vacuums for them a table mostly dead
-- (twice as many dead rows as live ones).
-- SQLite needs none: the key is accepted there and does nothing.
local jr = require "jr"

local function vacuums(env)
  local r = env:query(("SELECT vacuum_count AS n FROM pg_stat_user_tables " ..
    "WHERE schemaname = '%s' AND relname = 'jobs'"):format(env.schema))
  return r[1] and r[1].n or 0
end

local function drain(env, n, extra)
  env:script("v", "return function(job) end")
  env:config("concurrency = 2" .. (extra and (", " .. extra) or ""))
  local _, err, code = env:cli("migrate")
  assert.equal(0, code, err)
  env:exec(("WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g " ..
    "WHERE x < %d) INSERT INTO jobs (name, payload) SELECT 'v', '{}' FROM g"):format(n))
  env:start()
  jr.wait_for(function() return env:count() == 0 end, 30, "drained")
end

local specs = {}

specs.postgres = function(env)
  it("vacuums the jobs table after that many finished jobs, and goes on", function()
    drain(env, 2500, "vacuum_every = 1000")
    jr.wait_for(function() return vacuums(env) >= 1 end, 10,
      "a vacuum of the jobs table")
    -- jobs pushed after it run as before
    local id = env:push("v", "{}")
    jr.wait_for(function() return env:job(id) == nil end, 10, "job done")
    assert.equal(0, env:stop())
    assert.is_nil(env:log():find("vacuum of the jobs table failed", 1, true))
  end)

  it("vacuums at its start a table whose dead rows another session left", function()
    env:script("v", "return function(job) end")
    env:config("concurrency = 2, vacuum_every = 1000")
    local _, err, code = env:cli("migrate")
    assert.equal(0, code, err)
    -- 2500 jobs pushed and deleted by psql: none finished by the runner
    env:exec("WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g " ..
      "WHERE x < 2500) INSERT INTO jobs (name, payload) SELECT 'v', '{}' FROM g")
    env:exec("DELETE FROM jobs")
    assert.equal(0, vacuums(env))
    env:start()
    jr.wait_for(function() return vacuums(env) >= 1 end, 15,
      "a vacuum of the jobs table at the runner's start")
    local id = env:push("v", "{}")
    jr.wait_for(function() return env:job(id) == nil end, 10, "job done")
    assert.equal(0, env:stop())
    assert.is_nil(env:log():find("vacuum of the jobs table failed", 1, true))
  end)

  it("leaves dead rows to its own count where a backlog of their order waits", function()
    env:script("v", "return function(job) end")
    env:config('concurrency = 2, vacuum_every = 1000, log = { level = "debug" }')
    local _, err, code = env:cli("migrate")
    assert.equal(0, code, err)
    local fill = "WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g " ..
      "WHERE x < 2500) INSERT INTO jobs (name, payload) SELECT '%s', '{}' FROM g"
    env:exec(fill:format("v"))
    env:exec("DELETE FROM jobs")
    -- 2500 dead rows beside 2500 live ones no handler takes: a vacuum at
    -- the start would run inside a drain that its own count vacuums
    env:exec(fill:format("nobody"))
    env:start()
    jr.wait_for(function()
      return env:log():find("need no vacuum yet", 1, true)
    end, 15, "the runner's look at the dead rows")
    assert.equal(0, vacuums(env))
    assert.equal(2500, env:count("queued"))
    assert.equal(0, env:stop())
  end)

  it("leaves it to autovacuum with vacuum_every = 0", function()
    drain(env, 2500, "vacuum_every = 0")
    assert.equal(0, env:stop())
    assert.equal(0, vacuums(env))
  end)
end

specs.sqlite = function(env)
  it("is accepted and does nothing (SQLite removes index entries with the rows)", function()
    drain(env, 300, "vacuum_every = 100")
    assert.equal(0, env:stop())
  end)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " vacuum_every:", function()
    specs[backend](jr.test_env(backend))
  end)
end
