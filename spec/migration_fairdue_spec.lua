-- migration_fairdue_spec.lua - a fair queue's jobs not yet due take no
-- turn of their key (docs/queues.md, "Fair share"): migration 38 on both
-- engines. jobs_fairnew, the untagged jobs, is ordered by (queue, run_at,
-- id), so a claim tags the due ones as one range; on PostgreSQL
-- jobs_queue_known and fair_stamp (with the batch's run_at and run_in)
-- tag only the jobs due. A database of the schema before (37 on both)
-- holding a fair queue's jobs, queued (due and due in an hour, both
-- tagged), running and ended, is brought forward by `jobrunner migrate`
-- with every job intact, the due job's tag kept and the later one's
-- given back (it is tagged once due); a push then leaves its future jobs
-- untagged, and a runner runs the due jobs queued before the upgrade and
-- after.
local jr = require "jr"
local cjson = require "cjson"

local WORKER = jr.RECORD .. [[
  return function(job) record("done", job.payload.n) end]]

local BEFORE = 37       -- the schema before this migration, on both

local function old_jobs(env)
  local pg = env.backend == "postgres"
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO fair_paths (queue, path) VALUES ('fq', '%s');
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, finished_at)
    VALUES ('mfd.a', '{"t": "a", "n": 1}', 'fq', 'queued', %s, 0, NULL, NULL, NULL),
           ('mfd.a', '{"t": "b", "n": 2}', 'fq', 'queued', %s, 0, NULL, NULL, NULL),
           ('mfd.a', '{"t": "a", "n": 3}', 'fq', 'running', %s, 1, 'old-runner', %s, NULL),
           ('mfd.a', '{"t": "a", "n": 4}', 'fq', 'completed', %s, 1, NULL, NULL, %s);
    UPDATE jobs SET fair_tag = 1.5, fair_w = 1 WHERE id = 1;
    UPDATE jobs SET fair_tag = 5, fair_w = 1 WHERE id = 2;
  ]]):format(pg and "{t}" or "$.t", past, later, past, later, past, past))
end

-- n -> tag ("-" none) of the queued jobs
local function tags(env)
  local pg = env.backend == "postgres"
  local out = {}
  for _, r in ipairs(env:query("SELECT " .. (pg and "(payload ->> 'n')::int" or
      "json_extract(payload, '$.n')") .. " AS n, fair_tag AS tag FROM jobs"
      .. " WHERE state = 'queued' ORDER BY id")) do
    out[math.tointeger(r.n)] = (r.tag == nil or r.tag == cjson.null) and "-" or r.tag
  end
  return out
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 38 (fair jobs not yet due)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-" .. BEFORE .. " database with its fair jobs intact, a later job's tag given back; future pushes stay untagged", function()
      jr.make_schema(env, BEFORE)
      old_jobs(env)
      local before = jr.job_snapshot(env)
      -- tagged as the schema before tagged them (the one due in an hour
      -- at its push)
      assert.are.same({ [1] = 1.5, [2] = 5 }, tags(env))
      -- (a config without the fair queue: a runner's record of its
      -- weights, new here, would tag the queue again)
      env:config([[concurrency = 1]])
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      -- the job due later gives its tag back; the due one keeps its
      assert.are.same({ [1] = 1.5, [2] = "-" }, tags(env))
      env:config([[concurrency = 1,
        limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]])
      out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      -- the index of untagged jobs is by run_at
      local def
      if backend == "postgres" then
        def = env:query("SELECT indexdef AS d FROM pg_indexes WHERE indexname = 'jobs_fairnew'"
          .. " AND schemaname = '" .. env.schema .. "'")[1].d
      else
        def = env:query("SELECT sql AS d FROM sqlite_master WHERE name = 'jobs_fairnew'")[1].d
      end
      assert.matches("(queue, run_at, id)", def, 1, true)
      -- a push after: its future jobs keyed and untagged, its due one tagged
      local q = jr.client(env)
      assert(q:push_many({ { "mfd.a", { t = "c", n = 5 }, { queue = "fq", run_in = 3600 } },
                           { "mfd.a", { t = "c", n = 6 }, { queue = "fq" } } }))
      assert(q:push("mfd.a", { t = "c", n = 7 }, { queue = "fq", run_in = 3600 }))
      q:close()
      local now = tags(env)
      assert.equal("-", now[5])
      assert.equal("-", now[7])
      assert.is_number(now[6])
      env:exec(([[INSERT INTO jobs (name, payload, queue, state, run_at)
        VALUES ('mfd.a', '{"t": "c", "n": 8}', 'fq', 'queued', %s)]]):format(
        select(2, jr.past_later(env))))
      assert.equal("-", tags(env)[8])
      env:script("mfd.a", WORKER)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 2 end,
                  60, "the two due jobs done")
      jr.sleep(0.5)
      assert.equal(0, env:stop())
      local done = jr.lines(env.dir .. "/done")
      table.sort(done, function(a, b) return tonumber(a) < tonumber(b) end)
      assert.are.same({ "1", "6" }, done)
      assert.equal(4, env:count("queued"))
    end)
  end)
end
