-- sqlhooks_spec.lua - a success that carries jobrunner.sql statements is
-- a success only once its completion committed: on_job_success, the
-- runner's counts and jobrunner_jobs_finished_total tell it then, and a
-- success whose statement failed is told as the failed attempt it became
-- (docs/handlers.md, "Writes that commit with the job").
local jr = require "jr"
local cjson = require "cjson"
local H = require "jrhttp"

local RECORD = [[
  hooks = (function()
    local cjson = require "cjson"
    local function rec(e)
      local f = assert(io.open(os.getenv("PWD") .. "/events", "a"))
      f:write(cjson.encode(e), "\n")
      f:close()
    end
    return { on_job_success = rec, on_job_retry = rec, on_job_dead = rec }
  end)(),
  concurrency = 1]]

local function events(env)
  local out = {}
  local f = io.open(env.dir .. "/events")
  if not f then return out end
  for l in f:lines() do
    local e = cjson.decode(l)
    out[#out + 1] = e
  end
  f:close()
  return out
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " jobrunner.sql hooks and counters:", function()
    local env = jr.test_env(backend)

    it("tell a success once committed, a failed statement as the failure it became", function()
      local t
      if backend == "postgres" then
        jr.psql("CREATE SCHEMA IF NOT EXISTS " .. env.schema)
        jr.psql("CREATE TABLE " .. env.schema .. ".ledger (job bigint PRIMARY KEY)")
        t = env.schema .. ".ledger"
      else
        env:exec("CREATE TABLE ledger (job INTEGER PRIMARY KEY)")
        t = "ledger"
      end
      env:exec("INSERT INTO " .. (backend == "postgres" and t or "ledger") .. " (job) VALUES (-1)")
      env:script("pay", ([[
        local jobrunner = require "jobrunner"
        return { max_retries = 1, backoff = 0, handle = function(job)
          local p = job.payload
          if p.plain then return end
          jobrunner.sql("INSERT INTO %s (job) VALUES ($1)", p.bad and -1 or job.id)
        end }]]):format(t))
      local base = H.start(env, RECORD)
      local ok1 = env:push("pay")
      local bad = env:push("pay", '{"bad": true}')
      local plain = env:push("pay", '{"plain": true}')
      local ok2 = env:push("pay")
      jr.wait_for(function()
        local j = env:job(bad)
        return env:idle() and
               j and j.state == "dead"
      end)
      jr.wait_for(function() return #events(env) >= 5 end)
      local by = {}
      for _, e in ipairs(events(env)) do
        by[e.id] = by[e.id] or {}
        table.insert(by[e.id], e)
      end
      for _, id in ipairs({ ok1, plain, ok2 }) do
        assert.equal(1, #by[id], cjson.encode(by[id]))
        assert.equal("job_success", by[id][1].event)
        assert.is_number(by[id][1].duration)
      end
      assert.equal(2, #by[bad], cjson.encode(by[bad]))
      assert.equal("job_retry", by[bad][1].event)
      assert.equal(1, by[bad][1].attempt)
      assert.equal("job_dead", by[bad][2].event)
      assert.equal(2, by[bad][2].attempt)
      for _, e in ipairs(by[bad]) do
        assert.truthy(e.error:find("jobrunner.sql statement 1 of 'pay' failed", 1, true), e.error)
      end
      local _, text = H.req(base .. "/metrics", { token = true })
      local function fin(outcome)
        return tonumber(text:match('jobrunner_jobs_finished_total{name="pay",queue="default",outcome="'
          .. outcome .. '"} (%d+)') or "0")
      end
      assert.equal(3, fin("succeeded"), text)
      assert.equal(1, fin("failed"), text)
      assert.equal(1, fin("dead"), text)
      assert.truthy(text:find("\njobrunner_sql_failures_total 2\n", 1, true), text)
      assert.equal(0, env:stop())
      assert.truthy(env:log():find("stopped: 3 done, 1 failed, 1 dead", 1, true), env:log())
    end)
  end)
end
