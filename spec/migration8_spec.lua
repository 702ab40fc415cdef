-- migration8_spec.lua - migration 8 drops the jobs_locked_by index (one
-- index fewer written per claim): a database of schema 7 is brought forward
-- by `jobrunner migrate` with every job intact, and lease renewal, which
-- used that index, still keeps a long job's lease alive (it now reads the
-- running jobs through jobs_lease), while a lost runner's expired lease is
-- still rescued. The schema-7 database is made from the first blocks of
-- backends/*.sql with the sqlite3 or psql client.
local jr = require "jr"
local cjson = require "cjson"

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      last_error, locked_by, locked_until, finished_at)
    VALUES ('m8.long', '{"n": 1}', 'default', 'queued', %s, 0, NULL, NULL,
            NULL, NULL),
           ('m8.ok', '{"n": 2}', 'default', 'queued', %s, 0, NULL, NULL,
            NULL, NULL),
           ('m8.ok', '{"n": 3}', 'default', 'running', %s, 1, NULL,
            'lost-runner', %s, NULL),
           ('m8.ok', '{"n": 4}', 'default', 'dead', %s, 4, 'gave up', NULL,
            NULL, %s)
  ]]):format(past, later, past, past, past, past))
end

local function snapshot(env)
  local t = {}
  for _, r in ipairs(env:jobs()) do
    t[r.id] = { name = r.name, payload = cjson.decode(r.payload),
                state = r.state, attempts = r.attempts,
                locked_by = r.locked_by }
  end
  return t
end

local function has_index(env, name)
  local sql = env.backend == "postgres"
    and ("SELECT 1 AS x FROM pg_indexes WHERE schemaname = '%s'" ..
         " AND indexname = '%s'"):format(env.schema, name)
    or ("SELECT 1 AS x FROM sqlite_master WHERE type = 'index'" ..
        " AND name = '%s'"):format(name)
  return #env:query(sql) > 0
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 8 (one index fewer per claim)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-7 database with its jobs intact; leases are still renewed and rescued", function()
      jr.make_schema(env, 7)
      old_jobs(env)
      assert.is_true(has_index(env, "jobs_locked_by"))
      local before = snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, snapshot(env))
      assert.is_false(has_index(env, "jobs_locked_by"))
      assert.is_true(has_index(env, "jobs_lease"))
      -- a job that runs three leases long keeps its lease (renewed every
      -- third of it): it runs once; the lost runner's job is rescued
      env:script("m8.long", jr.RECORD .. [[
        return function(job)
          record("ran", "long")
          os.execute("sleep 3")
        end
      ]])
      env:script("m8.ok", jr.RECORD .. [[
        return function(job) record("ran", tostring(job.payload.n)) end
      ]])
      env:config("lease = 1, poll_interval = 0.1")
      env:start()
      jr.wait_for(function() return env:job(1) == nil end, 20, "the long job ends")
      local ran = jr.lines(env.dir .. "/ran")
      table.sort(ran)
      assert.are.same({ "3", "long" }, ran)
      assert.are.equal("queued", env:job(2).state)
      assert.are.equal("dead", env:job(4).state)
      assert.are.equal(0, env:stop())
      -- the lost runner's job was the only one requeued, once
      local log = env:log()
      local _, rescues = log:gsub("requeued %d+ jobs? whose runner's lease expired", "")
      assert.are.equal(1, rescues, log)
      assert.is_truthy(log:match("requeued 1 job whose runner's lease expired"), log)
      assert.is_nil(log:match("not recorded"), log)
    end)
  end)
end
