-- migration_fairkey_spec.lua - a fair key's value (docs/queues.md, "Fair
-- share"): migration 37 on both engines. On SQLite the insert triggers
-- jobs_fair_key and jobs_fair_name key true and false as the words (not
-- json_extract's 1 and 0) and cap a value at its first 512 characters;
-- on PostgreSQL jobs_queue_known and fair_stamp cap it the same (a longer
-- key failed the push: an index entry holds no more). A database of the
-- schema before (36 on both) holding a fair queue's jobs, queued, running
-- and ended, keyed by its triggers, is brought forward by `jobrunner
-- migrate` with every job intact and its key kept; a push then keys as
-- the other engine does, a long value capped, and a runner runs the jobs
-- queued before the upgrade and after.
local jr = require "jr"

local WORKER = jr.RECORD .. [[
  return function(job) record("done", job.payload.n) end]]

local BEFORE = 36       -- the schema before this migration, on both

local function old_jobs(env)
  local pg = env.backend == "postgres"
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO fair_paths (queue, path) VALUES ('fq', '%s');
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, finished_at)
    VALUES ('mfk.a', '{"t": "a", "n": 1}', 'fq', 'queued', %s, 0, NULL, NULL, NULL),
           ('mfk.a', '{"t": 1, "n": 2}', 'fq', 'queued', %s, 0, NULL, NULL, NULL),
           ('mfk.a', '{"t": "b", "n": 3}', 'fq', 'running', %s, 1, 'old-runner', %s, NULL),
           ('mfk.a', '{"t": "a", "n": 4}', 'fq', 'completed', %s, 1, NULL, NULL, %s)
  ]]):format(pg and "{t}" or "$.t", past, past, past, later, past, past))
end

local function keys(env)
  local pg = env.backend == "postgres"
  local out = {}
  for _, r in ipairs(env:query("SELECT " .. (pg and "(payload ->> 'n')::int" or
      "json_extract(payload, '$.n')") .. " AS n, fair_key AS k FROM jobs ORDER BY id")) do
    out[r.n] = r.k
  end
  return out
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 37 (a fair key's value)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-" .. BEFORE .. " database with its fair jobs intact; keys as the other engine", function()
      jr.make_schema(env, BEFORE)
      old_jobs(env)
      local before, keyed = jr.job_snapshot(env), keys(env)
      assert.same({ "a", "1", "b", "a" }, keyed)
      env:config([[concurrency = 1,
        limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]])
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      assert.are.same(keyed, keys(env))
      assert.equal(0, select(3, env:cli("queue", "pause", "fq")))
      local long = ("x"):rep(3000)
      for n, t in ipairs({ "true", "false", "1", ('"%s"'):format(long) }) do
        env:push("mfk.a", ('{"t": %s, "n": %d}'):format(t, n + 4), "--queue", "fq")
      end
      keyed[5], keyed[6], keyed[7], keyed[8] = "true", "false", "1", long:sub(1, 512)
      assert.are.same(keyed, keys(env))
      -- a batch push keys as a single one does
      local q = jr.client(env)
      assert(q:push_many({ { "mfk.a", { t = true, n = 9 }, { queue = "fq" } },
                           { "mfk.a", { t = long .. "y", n = 10 }, { queue = "fq" } } }))
      q:close()
      keyed[9], keyed[10] = "true", long:sub(1, 512)
      assert.are.same(keyed, keys(env))
      -- and another program's insert, keyed by the trigger
      env:exec(([[INSERT INTO jobs (name, payload, queue, state, run_at)
        VALUES ('mfk.a', '{"t": false, "n": 11}', 'fq', 'queued', %s),
               ('mfk.a', '{"t": "%sz", "n": 12}', 'fq', 'queued', %s)]]):format(
        jr.past_later(env), long, jr.past_later(env)))
      keyed[11], keyed[12] = "false", long:sub(1, 512)
      assert.are.same(keyed, keys(env))
      assert.equal(0, select(3, env:cli("queue", "resume", "fq")))
      env:script("mfk.a", WORKER)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 10 end,
                  60, "the ten queued jobs done")
      assert.equal(0, env:stop())
      local done = jr.lines(env.dir .. "/done")
      table.sort(done, function(a, b) return tonumber(a) < tonumber(b) end)
      assert.are.same({ "1", "2", "5", "6", "7", "8", "9", "10", "11", "12" }, done)
    end)
  end)
end
