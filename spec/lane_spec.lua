-- lane_spec.lua - PostgreSQL's second database round (runtime/master/lane.c): while
-- the runner's connection has a round out, a second connection records
-- the pending results and claims the next batch. Every job still runs once
-- per claim, and a job's progress report is never recorded after its end
-- (rounds with progress reports keep to the first connection).
local jr = require "jr"

if not jr.pg_url or (os.getenv("JR_BACKENDS") or "postgres"):find("postgres") == nil then
  return
end

local function rounds(log)
  return select(2, log:gsub("second connection: %d+ results, %d+ jobs claimed", ""))
end

describe("postgres: a second round in flight", function()
  local env = jr.test_env("postgres")

  it("drains on two connections, every job once", function()
    env:config('concurrency = 2, log = { level = "debug" }')
    env:script("rec", jr.LEDGER)
    env:cli("migrate")
    env:exec("INSERT INTO jobs (name, payload) SELECT 'rec', '{}' FROM generate_series(1, 6000)")
    local ledger = env.dir .. "/ledger"
    local p = env:start(jr.ledger_env(ledger))
    jr.wait_for(function() return env:count() == 0 end, 60, "drain")
    assert.equal(0, env:stop("TERM", p))
    local log = env:log(p)
    assert.matches("a second connection records and claims", log, 1, true)
    assert.is_true(rounds(log) > 0, "no round on the second connection")
    assert.is_nil(log:match("not recorded"), log)
    local seen, n = {}, 0
    for _, line in ipairs(jr.lines(ledger)) do
      assert.is_nil(seen[line], "job " .. line .. " ran twice")
      seen[line] = true
      n = n + 1
    end
    assert.equal(6000, n)
  end)

  it("records every job's last progress before its end", function()
    env:config('concurrency = 2, log = { level = "debug" }, ' ..
               'retention = { completed = "1h" }')
    env:script("quick", "return function() end")
    env:script("prog", [[
      local jobrunner = require "jobrunner"
      return function(job)
        jobrunner.progress(1, 3, "one")
        jobrunner.progress(3, 3, "all")
      end]])
    env:cli("migrate")
    -- quick jobs keep claims big; a progress job among every ten
    env:exec("INSERT INTO jobs (name, payload) SELECT CASE WHEN g % 10 = 0 " ..
             "THEN 'prog' ELSE 'quick' END, '{}' FROM generate_series(1, 6000) g")
    local p = env:start()
    jr.wait_for(function() return env:count("completed") == 6000 end, 60, "drain")
    assert.equal(0, env:stop("TERM", p))
    local log = env:log(p)
    assert.is_nil(log:match("not recorded"), log)
    local rows = env:query("SELECT count(*) AS n FROM jobs WHERE name = 'prog'" ..
      " AND progress_done = 3 AND progress_total = 3 AND progress_note = 'all'")
    assert.equal(600, rows[1].n)
  end)
end)
