-- migration_fairval_spec.lua - a fair key alike on both engines, and a
-- queue's key that cannot pose as a job name's (docs/queues.md, "Fair
-- share"): migration 39 on both engines. A database of the schema before
-- (38 on both) holding a fair queue's jobs keyed the old way (a number
-- as the engine wrote it, a value holding 0x1F as it is) and a key's
-- finish is brought forward by `jobrunner migrate` with every job
-- intact: the jobs not ended keyed again (a queued one whose key changed
-- untagged, to be tagged by the next claim; the others keep their tags),
-- the ended ones left alone, the key's finish its base; a runner then
-- runs the queued jobs.
local jr = require "jr"
local cjson = require "cjson"

local WORKER = jr.RECORD .. [[
  return function(job) record("done", job.payload.n) end]]

local BEFORE = 38       -- the schema before this migration, on both

local function old_jobs(env)
  local pg = env.backend == "postgres"
  local past, later = jr.past_later(env)
  local us = pg and "chr(31)" or "char(31)"
  env:exec(([[
    INSERT INTO fair_paths (queue, path) VALUES ('fq', '%s');
    INSERT INTO fair_keys (queue, key, pass) VALUES ('fq', 'a', 3);
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, finished_at, fair_key)
    VALUES ('mfv.a', '{"t": 1e3, "n": 1}', 'fq', 'queued', %s, 0, NULL, NULL, NULL, '%s'),
           ('mfv.a', '{"t": "rf\u001fx", "n": 2}', 'fq', 'queued', %s, 0, NULL, NULL, NULL, 'rf' || %s || 'x'),
           ('mfv.a', '{"t": "a", "n": 3}', 'fq', 'queued', %s, 0, NULL, NULL, NULL, 'a'),
           ('mfv.a', '{"t": 2.50, "n": 4}', 'fq', 'running', %s, 1, 'old-runner', %s, NULL, '%s'),
           ('mfv.a', '{"t": 1e3, "n": 5}', 'fq', 'completed', %s, 1, NULL, NULL, %s, 'old');
    UPDATE jobs SET fair_tag = 1.5, fair_w = 1 WHERE id = 1;
    UPDATE jobs SET fair_tag = 2, fair_w = 1 WHERE id = 2;
    UPDATE jobs SET fair_tag = 0.5, fair_w = 1 WHERE id = 3;
    UPDATE jobs SET fair_tag = 0.25, fair_w = 1 WHERE id = 4;
  ]]):format(pg and "{t}" or "$.t", past, pg and "1000" or "1000.0", past, us,
             past, past, later, pg and "2.50" or "2.5", past, past))
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

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 39 (fair keys alike, no queue key as a name's)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-" .. BEFORE .. " database with its fair jobs intact and keyed again", function()
      assert.are.same(jr.upgrade_intact(env, BEFORE, old_jobs))
      assert.are.same({
        -- a number by its value: untagged where its key changed (SQLite's
        -- "1000.0"), its tag kept where not (PostgreSQL's "1000")
        { "1000", backend == "postgres" and 1.5 or "-" },
        { "\31rf\31x", "-" },            -- 0x1F in front: the queue's key
        { "a", 0.5 },                    -- unchanged, its tag kept
        { "2.5", 0.25 },                 -- running: keyed, tag kept
        { "old", "-" },                  -- ended: left alone
      }, keys(env))
      local k = env:query("SELECT base, n, pass FROM fair_keys WHERE key = 'a'")[1]
      assert.are.same({ 3, 0, 3 }, { k.base, k.n, k.pass })
      -- a push after: keyed and tagged the new way, from the key's base
      env:config([[concurrency = 1,
        limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]])
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      local q = jr.client(env)
      assert(q:push("mfv.a", { t = 1000.0, n = 6 }, { queue = "fq" }))
      q:close()
      assert.equal("1000", keys(env)[6][1])
      env:script("mfv.a", WORKER)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 4 end,
                  60, "the four queued jobs done")
      jr.sleep(0.5)
      assert.equal(0, env:stop())
      local done = jr.lines(env.dir .. "/done")
      table.sort(done, function(a, b) return tonumber(a) < tonumber(b) end)
      assert.are.same({ "1", "2", "3", "6" }, done)
    end)
  end)
end
