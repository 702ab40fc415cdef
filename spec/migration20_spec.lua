-- migration20_spec.lua - migration 20 (each attempt's logs:
-- docs/handlers.md). A database of schema 18 holding jobs in every state
-- is brought forward by `jobrunner migrate` with every job intact and no
-- logs; a job that logs then keeps them, shown by `show --logs`, and an
-- old job shows none.
local jr = require "jr"
local cjson = require "cjson"

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts, flow,
                      parents_left, locked_by, locked_until, last_error,
                      died_at, finished_at)
    VALUES ('m20.a', '{"n": 1}', 'default', 'queued', %s, 0, 1, 0, NULL, NULL, NULL, NULL, NULL),
           ('m20.b', '{"n": 2}', 'default', 'waiting', %s, 0, 0, 1, NULL, NULL, NULL, NULL, NULL),
           ('m20.a', '{"n": 3}', 'mail', 'running', %s, 1, 0, 0, 'old-runner', %s, NULL, NULL, NULL),
           ('m20.a', '{"n": 4}', 'default', 'dead', %s, 4, 0, 0, NULL, NULL, 'boom', %s, %s),
           ('m20.a', '{"n": 5}', 'default', 'cancelled', %s, 0, 0, 0, NULL, NULL, NULL, NULL, %s),
           ('m20.a', '{"n": 6}', 'default', 'completed', %s, 1, 0, 0, NULL, NULL, NULL, NULL, %s),
           ('m20.a', '{"n": 7}', 'default', 'queued', %s, 0, 0, 0, NULL, NULL, NULL, NULL, NULL)
  ]]):format(past, past, past, later, past, past, past, past, past, past, past, later))
  env:exec("INSERT INTO job_deps (parent_id, child_id) VALUES (1, 2)")
end

local function columns(env)
  local sql = env.backend == "postgres"
    and "SELECT column_name AS name FROM information_schema.columns" ..
        " WHERE table_schema = current_schema() AND table_name = 'jobs'"
    or "SELECT name FROM pragma_table_info('jobs')"
  local t = {}
  for _, r in ipairs(env:query(sql)) do t[r.name] = true end
  return t
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 20 (each attempt's logs)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-18 database with its jobs intact; logs are kept on it", function()
      jr.make_schema(env, 18)
      old_jobs(env)
      assert.is_nil(columns(env).logs)
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      assert.is_true(columns(env).logs)
      assert.are.equal(0, #env:query("SELECT id FROM jobs WHERE logs IS NOT NULL"))
      out, err, code = env:cli("show", "4", "--logs")
      assert.are.equal(0, code, err)
      assert.matches("job 4: no logs kept", out, 1, true)
      -- a job that logs keeps its lines on the upgraded database
      env:script("m20.l", [[
return function(job) require("jobrunner").log("info", "on the new schema", {id = job.id}) end]])
      env:config('retention = { completed = "1h" }, queues = { default = 1, mail = 1 }')
      env:start()
      local id = env:push("m20.l", "{}")
      env:wait_state(id, "completed", 30)
      out, err, code = env:cli("show", tostring(id), "--logs", "--json")
      assert.are.equal(0, code, err)
      assert.are.equal(("on the new schema id=%d"):format(id), cjson.decode(out)[1].lines[1].msg)
    end)
  end)
end
