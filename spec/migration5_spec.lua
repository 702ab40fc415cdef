-- migration5_spec.lua - a database of schema 3 (the release before
-- recurring jobs) is brought forward by `jobrunner migrate` with every job
-- intact, and then fires a schedule. The schema-3 database is made from
-- the first three blocks of backends/*.sql (migration 4, another branch's,
-- may not exist yet: blocks apply when their number is above the
-- database's version, gaps are fine).
local jr = require "jr"
local cjson = require "cjson"

-- The text of the migrations before 4 of backends/ENGINE.sql.
local function schema3(engine)
  local sql = assert(jr.read_file(jr.root .. "/backends/" .. engine .. ".sql"))
  local cut = sql:find("\n%-%- migration [4-9]\n")
  return cut and sql:sub(1, cut) or sql
end

local function make_schema3(env)
  local f = os.tmpname()
  local cmd
  if env.backend == "postgres" then
    local qs = '"' .. env.schema .. '"'
    local text = schema3("postgres"):gsub("{{schema}}", function() return qs end)
    jr.write_file(f, "CREATE SCHEMA " .. qs .. ";\n" ..
      "CREATE TABLE " .. qs .. ".migrations (version int PRIMARY KEY, " ..
      "applied_at timestamptz NOT NULL DEFAULT now());\n" .. text ..
      "\nINSERT INTO " .. qs .. ".migrations (version) VALUES (1), (2), (3);\n")
    cmd = ("psql -X -q -v ON_ERROR_STOP=1 %s -1 -f %s"):format(
      jr.quote(jr.pg_url), jr.quote(f))
  else
    jr.write_file(f, schema3("sqlite") .. "\nPRAGMA user_version = 3;\n")
    cmd = ("sqlite3 %s < %s"):format(jr.quote(env:sqlite_path()), jr.quote(f))
  end
  local _, err, code = jr.sh(cmd)
  os.remove(f)
  assert(code == 0, "making schema 3: " .. err)
end

local function snapshot(env)
  local t = {}
  for _, r in ipairs(env:jobs()) do
    t[r.id] = { name = r.name, payload = cjson.decode(r.payload), queue = r.queue,
                priority = r.priority, state = r.state, attempts = r.attempts,
                last_error = r.last_error }
  end
  return t
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 5 (schedules)", function()
    local env = jr.test_env(backend)

    it("upgrades a schema-3 database with every job intact, then fires a schedule", function()
      make_schema3(env)
      local later = backend == "postgres" and "now() + interval '1 hour'" or
        "((julianday('now') - 2440587.5) * 86400.0) + 3600"
      env:exec(([[
        INSERT INTO jobs (name, payload, queue, priority, state, run_at, attempts,
                          last_error)
        VALUES ('m.later', '{"n": 1}', 'mail', 2, 'queued', %s, 0, NULL),
               ('m.dead', '{"n": 2}', 'default', 0, 'dead', %s, 3, 'gave up')
      ]]):format(later, later))
      local before = snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, snapshot(env))
      assert.are.same({}, env:query("SELECT schedule FROM schedule_fires"))
      out, err, code = env:cli("migrate")     -- again: a no-op
      assert.are.equal(0, code, out .. err)
      env:script("tick", jr.RECORD .. [[
        return function(job) record("fired", tostring(job.run_at)) end
      ]])
      env:config('poll_interval = 0.2, schedules = { { name = "tick", every = "1s" } }')
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/fired") >= 1 end, 15,
        "a fire")
      env:stop()
      assert.are.same(before, snapshot(env))
      local rows = env:query("SELECT schedule, job_id FROM schedule_fires")
      assert.is_true(#rows >= 1)
      assert.are.equal("tick", rows[1].schedule)
    end)
  end)
end
