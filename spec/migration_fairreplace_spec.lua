-- migration_fairreplace_spec.lua - a fair queue's job replaced by a newer
-- push keyed and tagged by its new payload (docs/queues.md, "Newer
-- replaces older"): migration 40 on PostgreSQL (fair_give, fair_replaced,
-- push_keyed and sequence_put calling them); SQLite's schema is
-- unchanged (its fix is the library's). A database of the schema before
-- (39 on both) holding a fair queue's jobs, one queued with a unique key
-- and tagged, is brought forward by `jobrunner migrate` with every job
-- intact, tags and keys' finishes included; a replace of the unique job
-- then moves it to its new payload's key and gives its old key's turn
-- back, and a runner runs the queued jobs.
local jr = require "jr"
local cjson = require "cjson"

local WORKER = jr.RECORD .. [[
  return function(job) record("done", job.payload.n) end]]

local BEFORE = 39       -- the schema before this migration, on both

local function old_jobs(env)
  local pg = env.backend == "postgres"
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO fair_paths (queue, path, wdefault) VALUES ('fq', '%s', 1);
    INSERT INTO fair_keys (queue, key, pass, base, n, tw)
    VALUES ('fq', 'a', 2, 0, 2, 1);
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, finished_at, fair_key,
                      unique_key)
    VALUES ('mfr.a', '{"t": "a", "n": 1}', 'fq', 'running', %s, 1, 'old-runner', %s, NULL, 'a', NULL),
           ('mfr.a', '{"t": "a", "n": 2}', 'fq', 'queued', %s, 0, NULL, NULL, NULL, 'a', 'u'),
           ('mfr.a', '{"t": "a", "n": 3}', 'fq', 'completed', %s, 1, NULL, NULL, %s, 'a', NULL);
    UPDATE jobs SET fair_tag = 0, fair_w = 1 WHERE id = 1;
    UPDATE jobs SET fair_tag = 1, fair_w = 1 WHERE id = 2;
  ]]):format(pg and "{t}" or "$.t", past, later, past, past, past))
end

-- n -> {key, tag ("-" none)} of every job
local function keys(env)
  local pg = env.backend == "postgres"
  local out = {}
  for _, r in ipairs(env:query("SELECT " .. (pg and "(payload ->> 'n')::int" or
      "json_extract(payload, '$.n')") .. " AS n, fair_key AS k, fair_tag AS tag"
      .. " FROM jobs ORDER BY id")) do
    out[math.tointeger(r.n)] = { r.k, (r.tag == nil or r.tag == cjson.null) and "-" or r.tag }
  end
  return out
end

local function key_row(env, k)
  local r = env:query(("SELECT base, n, pass FROM fair_keys WHERE key = '%s'"):format(k))[1]
  return { r.base, math.tointeger(r.n), r.pass }
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 40 (a replaced fair job keyed again)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-" .. BEFORE .. " database with its fair jobs intact", function()
      jr.make_schema(env, BEFORE)
      old_jobs(env)
      local before, bkeys = jr.job_snapshot(env), keys(env)
      env:config([[concurrency = 1,
        limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]])
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      assert.are.same(bkeys, keys(env))
      assert.are.same({ 0, 2, 2 }, key_row(env, "a"))
      -- the queued job, its key's last turn, replaced by a payload of key b
      local q = jr.client(env)
      local id, _, outcome = q:push("mfr.a", { t = "b", n = 4 },
        { queue = "fq", unique_key = "u", on_conflict = "replace" })
      assert.are.equal("replaced", outcome)
      assert.are.equal(2, math.tointeger(id))
      q:close()
      assert.are.same({ "b", 0 }, keys(env)[4])
      assert.are.same({ 0, 1, 1 }, key_row(env, "a"))   -- its turn back
      env:exec("UPDATE jobs SET state = 'completed', locked_by = NULL,"
        .. " locked_until = NULL WHERE id = 1")
      env:script("mfr.a", WORKER)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 1 end,
                  60, "the queued job done")
      jr.sleep(0.5)
      assert.equal(0, env:stop())
      assert.are.same({ "4" }, jr.lines(env.dir .. "/done"))
    end)
  end)
end
