-- migration3_spec.lua - a database of schema 2 (the release before queues,
-- cancel and history) is brought forward by `jobrunner migrate` with every
-- job intact, and then runs. The schema-2 database is made from the first
-- two blocks of backends/*.sql, with the sqlite3 or psql client, so the
-- spec needs nothing but the tree.
local jr = require "jr"
local cjson = require "cjson"

local function is_null(v) return v == nil or v == cjson.null end

-- Inserts, as a schema-2 producer or runner left them: two queued jobs
-- (one with a payload and a queue), one scheduled, one running under a
-- lost runner's expired lease, one dead.
local function old_jobs(env)
  local now, past, later
  if env.backend == "postgres" then
    now, past, later = "now()", "now() - interval '1 hour'",
      "now() + interval '1 hour'"
  else
    now = "((julianday('now') - 2440587.5) * 86400.0)"
    past, later = now .. " - 3600", now .. " + 3600"
  end
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, priority, state, run_at, attempts,
                      max_retries, last_error, locked_by, locked_until,
                      died_at)
    VALUES ('m.ok', '{"n": 1}', 'default', 0, 'queued', %s, 0, NULL, NULL,
            NULL, NULL, NULL),
           ('m.ok', '{"n": 2, "s": "x"}', 'mail', 3, 'queued', %s, 1, 5,
            'boom', NULL, NULL, NULL),
           ('m.ok', '{"n": 3}', 'default', 0, 'queued', %s, 0, NULL, NULL,
            NULL, NULL, NULL),
           ('m.ok', '{"n": 4}', 'default', 0, 'running', %s, 1, NULL, NULL,
            'lost-runner', %s, NULL),
           ('m.ok', '{"n": 5}', 'default', 0, 'dead', %s, 4, 3, 'gave up',
            NULL, NULL, %s)
  ]]):format(past, past, later, past, past, past, past))
  -- a job that ran and was deleted: its id is never given again
  env:exec("INSERT INTO jobs (name) VALUES ('m.gone')")
  env:exec("DELETE FROM jobs WHERE name = 'm.gone'")
end

-- The fields a migration must keep, by id.
local function snapshot(env)
  local t = {}
  for _, r in ipairs(env:jobs()) do
    local payload = cjson.decode(r.payload)
    t[r.id] = { name = r.name, payload = payload, queue = r.queue,
                priority = r.priority, state = r.state, attempts = r.attempts,
                max_retries = r.max_retries, last_error = r.last_error,
                locked_by = r.locked_by }
  end
  return t
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 3 (queues, cancel, history)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-2 database with every job intact, then runs it", function()
      jr.make_schema(env, 2)
      old_jobs(env)
      local before = snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, snapshot(env))
      -- the new columns and table are there, with their defaults
      local rows = env:query("SELECT id, started_at, finished_at, progress_done," ..
        " progress_total, progress_note, cancel_requested FROM jobs ORDER BY id")
      assert.are.equal(5, #rows)
      for _, r in ipairs(rows) do
        -- a dead job finished when it died; the others have not
        assert.are.equal(r.id ~= 5, is_null(r.finished_at))
        assert.is_true(is_null(r.started_at))
        assert.is_true(is_null(r.progress_done) and is_null(r.progress_total))
        assert.is_true(is_null(r.progress_note))
        assert.is_true(r.cancel_requested == 0 or r.cancel_requested == false)
      end
      assert.are.same({}, env:query("SELECT name FROM queues WHERE paused = " ..
        (backend == "postgres" and "true" or "1")))
      -- the new states are accepted, unknown ones still refused
      env:exec("UPDATE jobs SET state = 'cancelled' WHERE id = 3")
      env:exec("UPDATE jobs SET state = 'queued' WHERE id = 3")
      assert.has_error(function()
        env:exec("UPDATE jobs SET state = 'bogus' WHERE id = 3")
      end)
      -- ids keep increasing after the rebuild, past deleted ones
      local id = env:push("m.ok", '{"n": 6}')
      assert.are.equal(7, id)
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
      assert.are.same({ "1", "2", "4", "6" }, ran)
      assert.are.equal("queued", env:job(3).state)
      assert.are.equal("dead", env:job(5).state)
      env:stop()
    end)
  end)
end
