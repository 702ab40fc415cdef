-- migration11_spec.lua - migration 11 (workflows, docs/workflows.md): the
-- waiting state, the flow columns, job_deps and batches. A database of
-- schema 10 with jobs in every state (queued, scheduled, running, dead,
-- cancelled, completed with a result) is brought forward by `jobrunner
-- migrate` with every job intact (SQLite rebuilds the jobs table for its
-- state CHECK: ids, the AUTOINCREMENT sequence and the columns stay);
-- then a job can wait for an old one and runs once it completes. The
-- schema-10 database is made from the first blocks of backends/*/schema.sql.
local jr = require "jr"
local cjson = require "cjson"

local function old_jobs(env)
  local past, later = jr.past_later(env)
  local result = env.backend == "postgres" and "'{\"v\": 7}'::jsonb" or "'{\"v\":7}'"
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      last_error, locked_by, locked_until, finished_at, result)
    VALUES ('m11.a', '{"n": 1}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL),
           ('m11.a', '{"n": 2}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL),
           ('m11.a', '{"n": 3}', 'q2', 'running', %s, 1, NULL, 'r1', %s, NULL, NULL),
           ('m11.a', '{"n": 4}', 'default', 'dead', %s, 4, 'gave up', NULL, NULL, %s, NULL),
           ('m11.a', '{"n": 5}', 'default', 'cancelled', %s, 0, 'cancelled', NULL, NULL, %s, NULL),
           ('m11.a', '{"n": 6}', 'default', 'completed', %s, 1, NULL, NULL, NULL, %s, %s)
  ]]):format(past, later, past, later, past, past, past, past, past, past, result))
end

local snapshot = jr.job_snapshot

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 11 (workflows)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-10 database with jobs in every state intact", function()
      jr.make_schema(env, 10)
      old_jobs(env)
      local before = snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, snapshot(env))
      local r = env:query("SELECT result, flow, parents_left FROM jobs WHERE id = 6")[1]
      assert.are.same({ v = 7 }, type(r.result) == "string" and cjson.decode(r.result) or r.result)
      assert.are.equal(0, r.flow)
      -- ids go on above the old ones
      local id = env:push("m11.b", nil, "--after", "1")
      assert.are.equal(7, id)
      assert.are.equal("waiting", env:job(id).state)
      -- a job after the completed one (its result carried) is ready at once
      local ready = env:push("m11.b", nil, "--after", "6")
      assert.are.equal("queued", env:job(ready).state)
      env:script("m11.a", "return function() end")
      env:script("m11.b", jr.RECORD .. [[
        return function(job)
          for pid, p in pairs(job.parents) do
            record("b", pid .. " " .. p.state .. " " .. tostring(p.result and p.result.v))
          end
        end]])
      env:start()
      local ok = pcall(jr.wait_for, function()
        return #jr.lines(env.dir .. "/b") == 2 end, 20, "both ran")
      assert(ok, "both ran: " .. env:log() .. cjson.encode(env:jobs()))
      local lines = jr.lines(env.dir .. "/b")
      table.sort(lines)
      assert.are.same({ "1 completed nil", "6 completed 7" }, lines)
      assert.are.equal(0, env:stop())
    end)
  end)
end
