-- migration_limitkey_spec.lua - a limit key alike on both engines
-- (docs/limits.md, "The limit key"): migration 41 on both engines. A
-- database of the schema before (39) holding jobs keyed from their payload
-- the old way (a number as the engine wrote it, PostgreSQL's "a.0" an
-- index into an array) is brought forward by `jobrunner migrate` with
-- every job intact: the jobs not ended whose key is the one the old rule
-- took from their payload keyed by the new rule, the others (a key given
-- that differs from the payload's, an unkeyed job, an ended job) left
-- alone; a runner then runs the queued jobs, one at a time a key.
local jr = require "jr"
local cjson = require "cjson"

local WORKER = jr.RECORD .. [[
  return function(job) record("done", job.payload.n) end]]

local BEFORE = 39       -- the schema before this migration, on both

local function old_jobs(env)
  local pg = env.backend == "postgres"
  local past, later = jr.past_later(env)
  -- each job's key as the engine's old rule took it from its payload
  local k1, k2, k3, k6 = "1000.0", "1000.0", "1.5", "NULL"
  if pg then k1, k2, k3, k6 = "1000", "1000.0", "1.50", "'x'" end
  env:exec(([[
    INSERT INTO limit_paths (name, path) VALUES ('mlk.t', 't'), ('mlk.a', 'a.0');
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, finished_at, limit_key)
    VALUES ('mlk.t', '{"t": 1e3, "n": 1}', 'default', 'queued', %s, 0, NULL, NULL, NULL, '%s'),
           ('mlk.t', '{"t": 1000.0, "n": 2}', 'default', 'queued', %s, 0, NULL, NULL, NULL, '%s'),
           ('mlk.t', '{"t": 1.50, "n": 3}', 'default', 'running', %s, 1, 'old-runner', %s, NULL, '%s'),
           ('mlk.t', '{"t": "abc", "n": 4}', 'default', 'queued', %s, 0, NULL, NULL, NULL, 'abc'),
           ('mlk.t', '{"t": 1e3, "n": 5}', 'default', 'queued', %s, 0, NULL, NULL, NULL, 'given'),
           ('mlk.a', '{"a": ["x"], "n": 6}', 'default', 'queued', %s, 0, NULL, NULL, NULL, %s),
           ('mlk.t', '{"t": 1e3, "n": 7}', 'default', 'completed', %s, 1, NULL, NULL, %s, '%s'),
           ('mlk.t', '{"t": 2, "n": 8}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL);
  ]]):format(past, k1, past, k2, past, later, k3, past, past, past, k6,
             past, past, k1, past))
end

-- n -> its limit key (false: unkeyed) of every job
local function keys(env)
  local pg = env.backend == "postgres"
  local out = {}
  for _, r in ipairs(env:query("SELECT " .. (pg and "(payload ->> 'n')::int" or
      "json_extract(payload, '$.n')") .. " AS n, limit_key AS k"
      .. " FROM jobs ORDER BY id")) do
    out[math.tointeger(r.n)] = (r.k ~= nil and r.k ~= cjson.null) and r.k or false
  end
  return out
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 41 (limit keys alike on both engines)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-" .. BEFORE .. " database with its keyed jobs intact and keyed again", function()
      assert.are.same(jr.upgrade_intact(env, BEFORE, old_jobs))
      assert.are.same({
        "1000",                 -- a number by its value
        "1000",
        "1.5",                  -- running: keyed again, as the queued
        "abc",                  -- a string as it was
        "given",                -- not the payload's: given, kept
        false,                  -- "a.0" is a field: an array has none
        backend == "postgres" and "1000" or "1000.0",  -- ended: left alone
        false,                  -- unkeyed: stays so
      }, keys(env))
      -- a push after: keyed the new way, the same key as the jobs before
      env:config([[concurrency = 4, limits = {
        ["mlk.t"] = { key = "payload.t", per_key = { concurrency = 1 } },
        ["mlk.a"] = { key = "payload.a.0", per_key = { concurrency = 1 } } }]])
      local q = jr.client(env)
      assert(q:push("mlk.t", { t = 1000, n = 9 }))
      q:close()
      assert.equal("1000", keys(env)[9])
      env:script("mlk.t", WORKER)
      env:script("mlk.a", WORKER)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 7 end,
                  60, "the seven queued jobs done")
      jr.sleep(0.5)
      assert.equal(0, env:stop())
      local done = jr.lines(env.dir .. "/done")
      table.sort(done, function(a, b) return tonumber(a) < tonumber(b) end)
      assert.are.same({ "1", "2", "4", "5", "6", "8", "9" }, done)
    end)
  end)
end
