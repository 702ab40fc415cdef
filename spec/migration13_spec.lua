-- migration13_spec.lua - migration 13 takes out what a plain job paid for
-- without using it. On both backends: the kept jobs' index names
-- keep_until alone, the indexes of waiting jobs and batch members are
-- dropped. On PostgreSQL: one deferred trigger, jobs_end, replaces the
-- three end triggers (jobs_finished, jobs_flow_end, jobs_flow_gone);
-- SQLite settles a job's end in the library's completing transaction and
-- has none. A database of schema 12 with jobs in every state and two
-- unfinished flows is brought forward by `jobrunner migrate` with every
-- job and edge intact; then a parent ended by plain SQL (PostgreSQL) or
-- by `cancel` settles its child, a lost runner's parent is rescued,
-- succeeds and makes its child ready, and a job kept for its result is
-- pruned after its result_ttl. The schema-12 database is made from the
-- first blocks of backends/*/schema.sql.
local jr = require "jr"
local cjson = require "cjson"

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      last_error, locked_by, locked_until, finished_at,
                      flow, parents_left)
    VALUES ('m13.a', '{"n": 1}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, 1, 0),
           ('m13.b', '{"n": 2}', 'default', 'waiting', %s, 0, NULL, NULL, NULL, NULL, 0, 1),
           ('m13.a', '{"n": 3}', 'default', 'running', %s, 1, NULL,
            'lost-runner:1:ab', %s, NULL, 1, 0),
           ('m13.b', '{"n": 4}', 'default', 'waiting', %s, 0, NULL, NULL, NULL, NULL, 0, 1),
           ('m13.a', '{"n": 5}', 'default', 'dead', %s, 4, 'gave up', NULL, NULL, %s, 0, 0),
           ('m13.a', '{"n": 6}', 'default', 'cancelled', %s, 0, 'cancelled', NULL, NULL, %s, 0, 0),
           ('m13.a', '{"n": 7}', 'default', 'completed', %s, 1, NULL, NULL, NULL, %s, 0, 0),
           ('m13.a', '{"n": 8}', 'mail', 'queued', %s, 0, NULL, NULL, NULL, NULL, 0, 0)
  ]]):format(past, past, past, past, past, past, past, past, past, past, past,
             later))
  env:exec("INSERT INTO job_deps (parent_id, child_id) VALUES (1, 2), (3, 4)")
end

local snapshot = jr.job_snapshot

local function indexes(env)
  local t = {}
  local sql = env.backend == "postgres"
    and "SELECT indexname AS name FROM pg_indexes WHERE tablename = 'jobs'" ..
        " AND schemaname = current_schema()" ..
        " AND indexname IN ('jobs_kept', 'jobs_waiting', 'jobs_batch')" ..
        " ORDER BY indexname"
    or "SELECT name FROM sqlite_master WHERE type = 'index' AND name IN" ..
       " ('jobs_kept', 'jobs_waiting', 'jobs_batch') ORDER BY name"
  for _, r in ipairs(env:query(sql)) do t[#t + 1] = r.name end
  return t
end

local function triggers(env)
  if env.backend ~= "postgres" then return {} end
  local t = {}
  for _, r in ipairs(env:query("SELECT tgname FROM pg_trigger WHERE tgrelid" ..
      " = 'jobs'::regclass AND tgname IN ('jobs_finished', 'jobs_flow_end'," ..
      " 'jobs_flow_gone', 'jobs_end') ORDER BY tgname")) do
    t[#t + 1] = r.tgname
  end
  return t
end

for _, backend in ipairs(jr.backends()) do
  local pg = backend == "postgres"
  describe(backend .. ": migration 13 (what a plain job does not use)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-12 database with its jobs and flows intact; flows settle, kept jobs go", function()
      jr.make_schema(env, 12)
      old_jobs(env)
      assert.are.same(pg and { "jobs_finished", "jobs_flow_end", "jobs_flow_gone" }
        or {}, triggers(env))
      assert.are.same({ "jobs_batch", "jobs_kept", "jobs_waiting" }, indexes(env))
      local before = snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, snapshot(env))
      assert.are.same(pg and { "jobs_end" } or {}, triggers(env))
      assert.are.same({ "jobs_kept" }, indexes(env))
      out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, snapshot(env))
      -- parent 1 ends cancelled (plain SQL on PostgreSQL: the trigger
      -- settles it at commit): its child is cancelled with it
      if pg then
        env:exec("UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE id = 1")
      else
        out, err, code = env:cli("cancel", "1")
        assert.are.equal(0, code, out .. err)
      end
      assert.are.equal("cancelled", env:job(1).state)
      local child = env:job(2)
      assert.are.equal("cancelled", child.state)
      assert.are.equal("parent 1 ended cancelled", child.last_error)
      -- the lost runner's parent is rescued and run; its child then runs
      -- and sees it completed
      env:script("m13.a", "return function(job) return { n = job.payload.n } end")
      env:script("m13.b", jr.RECORD .. [[
        return function(job)
          for pid, p in pairs(job.parents) do
            record("b", pid .. " " .. p.state .. " " .. tostring(p.result and p.result.n))
          end
        end]])
      env:config("lease = 1")
      env:start()
      -- a job kept for its result (the new jobs_kept) goes after its ttl
      local kept = env:push("m13.a", '{"n": 9}', "--result-ttl", "1")
      local ok = pcall(jr.wait_for, function()
        return #jr.lines(env.dir .. "/b") == 1 end, 20, "the child ran")
      assert(ok, "the child ran: " .. env:log() .. cjson.encode(env:jobs()))
      assert.are.same({ "3 completed 3" }, jr.lines(env.dir .. "/b"))
      ok = pcall(jr.wait_for, function() return env:job(kept) == nil end, 30,
        "the kept job pruned")
      assert(ok, "the kept job pruned: " .. cjson.encode(env:jobs()))
      assert.are.equal(0, env:stop())
      -- the old ended jobs are as they were, the scheduled one waits
      assert.are.equal("queued", env:job(8).state)
      assert.are.equal("dead", env:job(5).state)
      assert.are.equal("cancelled", env:job(6).state)
    end)
  end)
end
