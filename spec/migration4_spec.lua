-- migration4_spec.lua - a database of schema 3 (the release before unique
-- jobs) is brought forward by `jobrunner migrate` with every job intact,
-- takes unique pushes, and runs. The schema-3 database is made from the
-- first three blocks of backends/*.sql, with the sqlite3 or psql client,
-- so the spec needs nothing but the tree.
local jr = require "jr"
local cjson = require "cjson"
local client = require "jobrunner"

local function is_null(v) return v == nil or v == cjson.null end

-- Jobs as a schema-3 producer or runner left them: queued, scheduled,
-- running under an expired lease, dead, completed, cancelled; and one
-- deleted (its id is never given again).
local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, priority, state, run_at, attempts,
                      max_retries, last_error, locked_by, locked_until)
    VALUES ('m.ok', '{"n": 1}', 'default', 0, 'queued', %s, 0, NULL, NULL,
            NULL, NULL),
           ('m.ok', '{"n": 2}', 'mail', 3, 'queued', %s, 1, 5, 'boom',
            NULL, NULL),
           ('m.ok', '{"n": 3}', 'default', 0, 'queued', %s, 0, NULL, NULL,
            NULL, NULL),
           ('m.ok', '{"n": 4}', 'default', 0, 'running', %s, 1, NULL, NULL,
            'lost-runner', %s),
           ('m.ok', '{"n": 5}', 'default', 0, 'dead', %s, 4, 3, 'gave up',
            NULL, NULL),
           ('m.ok', '{"n": 6}', 'default', 0, 'completed', %s, 1, NULL, NULL,
            NULL, NULL),
           ('m.ok', '{"n": 7}', 'default', 0, 'cancelled', %s, 0, NULL,
            'cancelled', NULL, NULL)
  ]]):format(past, past, later, past, past, past, past, past))
  env:exec("INSERT INTO jobs (name) VALUES ('m.gone')")
  env:exec("DELETE FROM jobs WHERE name = 'm.gone'")
end

local function snapshot(env)
  local t = {}
  for _, r in ipairs(env:jobs()) do
    t[r.id] = { name = r.name, payload = cjson.decode(r.payload), queue = r.queue,
                priority = r.priority, state = r.state, attempts = r.attempts,
                max_retries = r.max_retries, last_error = r.last_error,
                locked_by = r.locked_by, run_at = r.run_at }
  end
  return t
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 4 (unique jobs)", function()
    local env = jr.test_env(backend)

    it("upgrades a schema-3 database with every job intact, then takes unique pushes and runs", function()
      jr.make_schema(env, 3)
      old_jobs(env)
      local before = snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, snapshot(env))
      local rows = env:query("SELECT id, unique_key FROM jobs ORDER BY id")
      assert.are.equal(7, #rows)
      for _, r in ipairs(rows) do assert.is_true(is_null(r.unique_key)) end
      assert.are.same({}, env:query("SELECT * FROM unique_keys"))
      -- unique pushes work, ids keep increasing past deleted ones
      local q = assert(client.open(env.url, { schema = env.schema }))
      local id, dup = q:push("m.ok", { n = 9 }, { unique_key = "k", unique_for = 60 })
      assert.are.equal(9, id)
      assert.is_false(dup)
      assert.are.same({ 9, true, "duplicate" }, { q:push("m.ok", { n = 10 }, { unique_key = "k" }) })
      q:close()
      -- migrate again: a no-op
      out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      -- and it runs: the queued ones, the rescued one, the new one
      env:script("m.ok", jr.RECORD .. [[
        return function(job) record("ran", tostring(job.payload.n)) end
      ]])
      env:config("lease = 1, poll_interval = 0.1")
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/ran") >= 4 end, 30,
        "old jobs run")
      local ran = jr.lines(env.dir .. "/ran")
      table.sort(ran)
      assert.are.same({ "1", "2", "4", "9" }, ran)
      assert.are.equal("queued", env:job(3).state)
      assert.are.equal("dead", env:job(5).state)
      env:stop()
    end)
  end)
end
