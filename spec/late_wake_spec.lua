-- late_wake_spec.lua - PostgreSQL: a job pushed while the runner records a
-- result is claimed by that same database cycle, once the result is in,
-- not by a cycle of its own after a round through the loop (the wake-up,
-- a NOTIFY, comes only after the push's commit). The runner's result is
-- held back by a row lock (spec/helpers/pghold.lua) so that the push
-- lands while it waits, every time; the cycles are counted in /metrics.
local jr = require "jr"
local H = require "jrhttp"
local pghold = require "pghold"

if not jr.pg_url or (os.getenv("JR_BACKENDS") or "postgres"):find("postgres") == nil then
  return
end

local function cycles(base)
  local code, text = H.req(base .. "/metrics", { token = true })
  assert.equal(200, code, text)
  return tonumber(text:match("\njobrunner_db_cycle_seconds_count (%d+)"))
end

describe("postgres: a wake-up while a result is recorded", function()
  local env = jr.test_env("postgres")

  it("claims in the cycle that records the result", function()
    env:script("a", [[
      return function(job)
        while not io.open(job.payload.go) do os.execute("sleep 0.05") end
      end]])
    env:script("b", "return function() end")
    env:cli("migrate")
    -- no cycle but the jobs' own: no poll, renewal or rescue meanwhile
    local base = H.start(env, "concurrency = 1, poll_interval = 3600, " ..
      "lease = 86400")
    -- a's result and b's claim, then b's result: two cycles (b's own claim
    -- cycle made three); the fewest of up to six tries (a loaded
    -- machine's late wake-up may add a cycle of its own to one, and under
    -- the sanitizers to three in a row; the regression adds one to each)
    local fewest
    for try = 1, 6 do
      local go = env.dir .. "/go" .. try
      local a = env:push("a", ('{"go":%q}'):format(go))
      env:wait_state(a, "running")
      -- the cycle that claimed a has ended: it sent a out
      local before = jr.wait_for(function() return cycles(base) end, 10, "metrics")
      -- a's result waits on this row lock; b is pushed (and its NOTIFY
      -- sent) meanwhile, and the lock is let go a second after b is there
      local hold = pghold.start(env, { "SELECT 1 FROM jobs WHERE id = " .. a .. " FOR UPDATE" }, {
        ([[DO $$ BEGIN WHILE NOT EXISTS (SELECT 1 FROM jobs WHERE name = 'b' AND payload->>'try' = '%d') LOOP
            PERFORM pg_sleep(0.02); END LOOP; END $$]]):format(try),
        "SELECT pg_sleep(1)" })
      jr.write_file(go, "")
      jr.wait_for(function()
        return env:query("SELECT count(*) AS n FROM pg_locks WHERE NOT granted")[1].n > 0
      end, 30, "a's result waiting on the lock")
      local b = env:push("b", ('{"try": %d}'):format(try))
      local code, err = pghold.finish(hold)
      assert.equal(0, code, err)
      jr.wait_for(function() return env:job(b) == nil end, 30, "b done")
      jr.wait_for(function() return cycles(base) >= before + 2 end, 10, "the cycles counted")
      jr.sleep(0.5)
      local n = cycles(base) - before
      fewest = math.min(fewest or n, n)
      if fewest == 2 then break end
    end
    assert.equal(2, fewest)
    assert.equal(0, env:stop("TERM"))
  end)
end)
