-- migration23_spec.lua - migration 23 (newer replaces older:
-- docs/queues.md; limits by cost: docs/limits.md). A database of schema
-- 18 holding jobs in every state (a
-- running job holding a unique key, a sequence's queued head among them)
-- is brought forward by `jobrunner migrate` with every job intact, at
-- no cost (the new column NULL) and its config's limit sizes recorded; then
-- on_conflict cancel_running and replace work on the old rows: the
-- running holder is cancelled and gives up its key, the sequence's
-- pending job takes the new payload. On PostgreSQL the SQL producer's
-- push and sequence() take them (sequence() with its new parameter, the
-- old calls unchanged).
local jr = require "jr"

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, last_error, died_at,
                      finished_at, unique_key, sequence_key, seq_no, seq_fail)
    VALUES ('m23.a', '{"n": 1}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL, NULL, 'q', 1, 'block'),
           ('m23.a', '{"n": 2}', 'mail', 'running', %s, 1, 'old-runner', %s, NULL, NULL, NULL, 'k', NULL, NULL, NULL),
           ('m23.a', '{"n": 3}', 'default', 'dead', %s, 4, NULL, NULL, 'boom', %s, %s, NULL, NULL, NULL, NULL),
           ('m23.a', '{"n": 4}', 'default', 'cancelled', %s, 0, NULL, NULL, NULL, NULL, %s, NULL, NULL, NULL, NULL),
           ('m23.a', '{"n": 5}', 'default', 'completed', %s, 1, NULL, NULL, NULL, NULL, %s, NULL, NULL, NULL, NULL),
           ('m23.b', '{"n": 6}', 'default', 'waiting', %s, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
  ]]):format(past, past, later, past, past, past, past, past, past, past, past))
end

local function one(env, sql)
  local rows = env:query(sql)
  local _, v = next(rows[1])
  return v
end

for _, backend in ipairs(jr.backends()) do
  local pg = backend == "postgres"
  describe(backend .. ": migration 23 (on_conflict cancel_running, cost)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-18 database with its jobs intact; cancel_running and replace work on it", function()
      jr.make_schema(env, 18)
      old_jobs(env)
      local before = jr.job_snapshot(env)
      env:config([[limits = { ["m23.c"] = { rate = "100/1m" } }]])
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      -- limits by cost: the old jobs cost nothing more (NULL: 1); the
      -- limit's size is recorded, and a push over it refused
      assert.are.equal(0, #env:query("SELECT id FROM jobs WHERE cost IS NOT NULL"))
      assert.are.same({ { scope = "m23.c", size = 100 } },
                      env:query("SELECT scope, size FROM limit_sizes"))
      out, err, code = env:cli("push", "m23.c", "--cost", "101")
      assert.are.equal(2, code, out)
      assert.truthy(err:find("cost 101 is over limit 'm23.c'", 1, true), err)
      local c = tonumber((env:cli("push", "m23.c", "--cost", "100")))
      assert.are.same({ { cost = 100 } }, env:query("SELECT cost FROM jobs WHERE id = " .. c))
      -- the running holder of 'k' is cancelled, the push is new in its place
      out, err, code = env:cli("push", "m23.a", '{"n": 7}', "--unique-key", "k",
                               "--on-conflict", "cancel_running")
      assert.are.equal(0, code, err)
      local id, what = out:match("^(%d+) (%a+)")
      assert.are.equal("superseded", what)
      assert.are.equal("running", env:job(2).state)
      assert.are.equal(1, #env:query("SELECT id FROM jobs WHERE id = 2" ..
                                     " AND unique_key IS NULL AND cancel_requested"))
      assert.are.same({ { id = tonumber(id) } },
                      env:query("SELECT id FROM jobs WHERE unique_key = 'k'"))
      -- the old sequence's queued head takes the payload
      out, err, code = env:cli("push", "m23.a", '{"n": 8}', "--sequence", "q",
                               "--on-conflict", "replace")
      assert.are.equal(0, code, err)
      assert.are.equal("1 replaced\n", out)
      assert.truthy(env:job(1).payload:find('"n":%s*8'))
      if not pg then return end
      -- the SQL producer: sequence() with on_conflict, and as before
      local s = one(env, "SELECT sequence(push('m23.s', '{\"v\": 1}'), 'r')")
      assert.are.equal(tonumber(s), tonumber(one(env,
        "SELECT sequence(push('m23.s', '{\"v\": 2}'), 'r', on_conflict => 'replace')")))
      assert.truthy(env:job(s).payload:find('"v":%s*2'))
      local s2 = one(env, "SELECT sequence(push('m23.s', '{\"v\": 3}'), 'r', 'skip')")
      assert.are_not.equal(tonumber(s), tonumber(s2))
      assert.are.equal("waiting", env:job(s2).state)
      -- push(..., on_conflict => 'cancel_running') on a pending holder replaces it
      assert.are.equal(tonumber(id), tonumber(one(env,
        "SELECT push('m23.a', '{\"n\": 9}', unique_key => 'k', on_conflict => 'cancel_running')")))
      assert.truthy(env:job(id).payload:find('"n":%s*9'))
      out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
    end)
  end)
end
