-- migration6_spec.lua - a database of schema 3 (the release before limits
-- per key) is brought forward by `jobrunner migrate` with every job
-- intact, and then runs under limits. The schema-3 database is made from
-- the first three blocks of backends/*.sql, with the sqlite3 or psql
-- client, so the spec needs nothing but the tree.
local jr = require "jr"
local cjson = require "cjson"

local function is_null(v) return v == nil or v == cjson.null end

-- Jobs as a schema-3 runner left them: queued (one in another queue),
-- scheduled, running under a lost runner's expired lease, dead, completed.
local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      last_error, locked_by, locked_until, finished_at)
    VALUES ('m6.ok', '{"n": 1, "acct": "a"}', 'default', 'queued', %s, 0,
            NULL, NULL, NULL, NULL),
           ('m6.ok', '{"n": 2, "acct": "a"}', 'mail', 'queued', %s, 1,
            'boom', NULL, NULL, NULL),
           ('m6.ok', '{"n": 3}', 'default', 'queued', %s, 0, NULL, NULL,
            NULL, NULL),
           ('m6.ok', '{"n": 4}', 'default', 'running', %s, 1, NULL,
            'lost-runner', %s, NULL),
           ('m6.ok', '{"n": 5}', 'default', 'dead', %s, 4, 'gave up', NULL,
            NULL, %s),
           ('m6.ok', '{"n": 6}', 'default', 'completed', %s, 1, NULL, NULL,
            NULL, %s)
  ]]):format(past, past, later, past, past, past, past, past, past))
end

local function snapshot(env)
  local t = {}
  for _, r in ipairs(env:jobs()) do
    t[r.id] = { name = r.name, payload = cjson.decode(r.payload),
                queue = r.queue, state = r.state, attempts = r.attempts,
                last_error = r.last_error, locked_by = r.locked_by }
  end
  return t
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 6 (limits per key)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-3 database with every job intact, then runs it under limits", function()
      jr.make_schema(env, 3)
      old_jobs(env)
      local before = snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, snapshot(env))
      -- old jobs have no key; the new tables are there and empty
      for _, r in ipairs(env:query("SELECT limit_key FROM jobs")) do
        assert.is_true(is_null(r.limit_key))
      end
      assert.are.same({}, env:query("SELECT scope FROM limit_buckets"))
      assert.are.same({}, env:query("SELECT name FROM limit_paths"))
      -- a key over 256 bytes is refused by the table itself
      assert.has_error(function()
        env:exec("UPDATE jobs SET limit_key = '" .. ("k"):rep(257) .. "' WHERE id = 1")
      end)
      local id = env:push("m6.ok", '{"n": 7}', "--key", "b")
      assert.are.equal("b", env:query("SELECT limit_key FROM jobs WHERE id = " .. id)[1].limit_key)
      out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      env:script("m6.ok", jr.RECORD .. [[
        return function(job) record("ran", tostring(job.payload.n)) end
      ]])
      env:config([[lease = 1, poll_interval = 0.1,
        limits = { ["m6.ok"] = { concurrency = 1, per_key = { concurrency = 1 } } }]])
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/ran") >= 4 end, 20,
        "old jobs run")
      local ran = jr.lines(env.dir .. "/ran")
      table.sort(ran)
      assert.are.same({ "1", "2", "4", "7" }, ran)
      assert.are.equal("queued", env:job(3).state)
      assert.are.equal("dead", env:job(5).state)
      env:stop()
    end)
  end)
end
