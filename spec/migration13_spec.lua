-- migration13_spec.lua - migration 13 (PostgreSQL only; SQLite settles a
-- job's end in the library's completing transaction and has no such
-- triggers) replaces the three end triggers (jobs_finished, jobs_flow_end,
-- jobs_flow_gone) with one deferred trigger, jobs_end. A database of
-- schema 12 with jobs in every state and two unfinished flows is brought
-- forward by `jobrunner migrate` with every job and edge intact; then a
-- parent ended by plain SQL settles its child at commit and notifies,
-- and a lost runner's parent is rescued, succeeds and makes its child
-- ready. The schema-12 database is made from the first blocks of
-- backends/postgres/schema.sql.
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

local function snapshot(env)
  local t = {}
  for _, r in ipairs(env:jobs()) do
    t[r.id] = { name = r.name, payload = cjson.decode(r.payload), queue = r.queue,
                state = r.state, attempts = r.attempts, locked_by = r.locked_by,
                last_error = r.last_error }
  end
  return t
end

local function triggers(env)
  local t = {}
  for _, r in ipairs(env:query("SELECT tgname FROM pg_trigger WHERE tgrelid" ..
      " = 'jobs'::regclass AND tgname IN ('jobs_finished', 'jobs_flow_end'," ..
      " 'jobs_flow_gone', 'jobs_end') ORDER BY tgname")) do
    t[#t + 1] = r.tgname
  end
  return t
end

for _, backend in ipairs(jr.backends()) do
  if backend == "postgres" then
  describe(backend .. ": migration 13 (one end trigger)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-12 database with its jobs and flows intact; the new trigger settles them", function()
      jr.make_schema(env, 12)
      old_jobs(env)
      assert.are.same({ "jobs_finished", "jobs_flow_end", "jobs_flow_gone" },
        triggers(env))
      local before = snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, snapshot(env))
      assert.are.same({ "jobs_end" }, triggers(env))
      out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, snapshot(env))
      -- plain SQL ends parent 1: its child is cancelled in the same
      -- commit, and each end is notified
      env:exec("UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE id = 1")
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
      local ok = pcall(jr.wait_for, function()
        return #jr.lines(env.dir .. "/b") == 1 end, 20, "the child ran")
      assert(ok, "the child ran: " .. env:log() .. cjson.encode(env:jobs()))
      assert.are.same({ "3 completed 3" }, jr.lines(env.dir .. "/b"))
      assert.are.equal(0, env:stop())
      -- the old ended jobs are as they were, the scheduled one waits
      assert.are.equal("queued", env:job(8).state)
      assert.are.equal("dead", env:job(5).state)
      assert.are.equal("cancelled", env:job(6).state)
    end)
  end)
  end
end
