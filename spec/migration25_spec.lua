-- migration25_spec.lua - migration 25 (fair share inside a queue:
-- docs/queues.md, "Fair share"). A database of schema 23 holding jobs in
-- every state, some in a queue that the config makes fair, is brought
-- forward by `jobrunner migrate` with every job intact; the fair queue is
-- recorded in fair_paths and its jobs not ended get their fair key
-- (those ended and those of other queues none); a push into it gets its
-- key too, through the library and, on PostgreSQL, through the SQL
-- producer's push() (the insert trigger), on SQLite through another
-- program's plain INSERT (the trigger jobs_fair_key); and the old queued jobs
-- are claimed round robin between their keys.
local jr = require "jr"

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                      locked_by, locked_until, last_error, died_at, finished_at)
    VALUES ('m25.w', '{"t": "a", "n": 1}', 'fq', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL),
           ('m25.w', '{"t": "a", "n": 2}', 'fq', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL),
           ('m25.w', '{"t": "a", "n": 3}', 'fq', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL),
           ('m25.w', '{"t": "b", "n": 1}', 'fq', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL),
           ('m25.w', '{"t": "a", "n": 0}', 'fq', 'running', %s, 1, 'old-runner', %s, NULL, NULL, NULL),
           ('m25.w', '{"t": "a", "n": 9}', 'fq', 'dead', %s, 4, NULL, NULL, 'boom', %s, %s),
           ('m25.w', '{"t": "a", "n": 8}', 'fq', 'completed', %s, 1, NULL, NULL, NULL, NULL, %s),
           ('m25.w', '{"t": "c"}', 'default', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL)
  ]]):format(past, past, past, past, past, later, past, past, past, past, past, past))
end

local CONFIG = [[concurrency = 1,
  limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]]

for _, backend in ipairs(jr.backends()) do
  local pg = backend == "postgres"
  describe(backend .. ": migration 25 (fair keys)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-23 database with its jobs intact and keys its fair queue's jobs", function()
      jr.make_schema(env, 23)
      old_jobs(env)
      local before = jr.job_snapshot(env)
      env:config(CONFIG)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      assert.are.same({ { queue = "fq" } }, env:query("SELECT queue FROM fair_paths"))
      -- the queued and running jobs of fq have their key; the ended ones
      -- and the other queue's none
      local keyed = {}
      for _, r in ipairs(env:query("SELECT id, fair_key FROM jobs WHERE fair_key IS NOT NULL ORDER BY id")) do
        keyed[#keyed + 1] = ("%d=%s"):format(r.id, r.fair_key)
      end
      assert.are.same({ "1=a", "2=a", "3=a", "4=b", "5=a" }, keyed)
      -- a push into the fair queue gets its key, one elsewhere none
      local id = tonumber((env:cli("push", "m25.w", '{"t": "d", "n": 1}', "--queue", "fq")))
      local other = tonumber((env:cli("push", "m25.w", '{"t": "d"}')))
      assert.are.same({ { fair_key = "d" } }, env:query("SELECT fair_key FROM jobs WHERE id = " .. id))
      assert.are.equal(0, #env:query("SELECT id FROM jobs WHERE fair_key IS NOT NULL AND id = " .. other))
      if not pg then
        -- another program's plain INSERT: the trigger jobs_fair_key keys it
        env:exec([[INSERT INTO jobs (name, payload, queue) VALUES ('m25.w', '{"t": "f", "n": 1}', 'fq')]])
        assert.are.same({ { fair_key = "f" } },
                        env:query("SELECT fair_key FROM jobs WHERE payload LIKE '%\"f\"%'"))
      end
      if pg then
        -- the SQL producer's push(): the insert trigger keys it
        local rows = env:query("SELECT push('m25.w', '{\"t\": \"e\", \"n\": 1}', queue => 'fq') AS id")
        local sid = tonumber(rows[1].id)
        assert.are.same({ { fair_key = "e" } }, env:query("SELECT fair_key FROM jobs WHERE id = " .. sid))
      end
      -- the old rows are claimed round robin between the keys: b's job
      -- (pushed after a's three) starts among the fair queue's first three
      env:config(CONFIG)
      env:script("m25.w", jr.RECORD .. [[
        return function(job) record("starts", job.payload.t .. tostring(job.payload.n)) end]])
      env:start()
      -- none queued or running but the old runner's: each handler has
      -- written its start (a job still running may not have, on a loaded
      -- machine)
      jr.wait_for(function()
        return #env:query("SELECT id FROM jobs WHERE state = 'queued' OR (state = 'running'"
          .. " AND coalesce(locked_by, '') <> 'old-runner')") == 0
      end, 60, "the queued jobs run")
      env:stop()
      -- (the fair queue's starts: the other queue's jobs have no n)
      local starts = {}
      for _, l in ipairs(jr.lines(env.dir .. "/starts")) do
        if not l:find("nil$") then starts[#starts + 1] = l end
      end
      local first3 = table.concat(starts, " ", 1, math.min(3, #starts))
      assert.truthy(first3:find("b1", 1, true), table.concat(starts, " "))
      out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
    end)
  end)
end
