-- migration26_spec.lua - migration 26 (sequence as a handler option:
-- docs/queues.md, "Sequences"). A database of schema 23 holding jobs in
-- every state (a sequence's queued head and waiting job among them) is
-- brought forward by `jobrunner migrate` with every job intact and an
-- empty sequence_paths; a path recorded there then puts a pushed job of
-- its name into the sequence its payload names, behind the old head.
local jr = require "jr"

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, last_error, died_at,
                      finished_at, sequence_key, seq_no, seq_fail, parents_left)
    VALUES ('m26.a', '{"c": "q", "n": 1}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL, 'q', 1, 'block', 0),
           ('m26.a', '{"n": 2}', 'mail', 'running', %s, 1, 'old-runner', %s, NULL, NULL, NULL, NULL, NULL, NULL, 0),
           ('m26.a', '{"n": 3}', 'default', 'dead', %s, 4, NULL, NULL, 'boom', %s, %s, NULL, NULL, NULL, 0),
           ('m26.a', '{"n": 4}', 'default', 'cancelled', %s, 0, NULL, NULL, NULL, NULL, %s, NULL, NULL, NULL, 0),
           ('m26.a', '{"n": 5}', 'default', 'completed', %s, 1, NULL, NULL, NULL, NULL, %s, NULL, NULL, NULL, 0),
           ('m26.b', '{"n": 6}', 'default', 'waiting', %s, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1)
  ]]):format(past, past, later, past, past, past, past, past, past, past, past))
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 26 (sequence as a handler option)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-23 database with its jobs intact; a recorded path sequences a push", function()
      jr.make_schema(env, 23)
      old_jobs(env)
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      assert.are.equal(0, #env:query("SELECT name FROM sequence_paths"))
      -- what a runner with `sequence = "payload.c"` in m26.a's handler writes
      env:exec("INSERT INTO sequence_paths (name, path) VALUES ('m26.a', 'c')")
      out, err, code = env:cli("push", "m26.a", '{"c": "q", "n": 7}')
      assert.are.equal(0, code, err)
      local rows = env:query("SELECT sequence_key AS k, seq_no AS no, state FROM jobs WHERE id = "
                             .. math.tointeger(tonumber(out)))
      assert.are.same({ { k = "q", no = 2, state = "waiting" } }, rows)
    end)
  end)
end
