-- migration18_spec.lua - migration 18 (sequences: docs/queues.md). A
-- database of schema 14 holding jobs in every state (a queued parent with
-- a waiting child among them) is brought forward by `jobrunner migrate`
-- with every job intact and in no sequence; the old dependency still
-- readies its child when its parent ends (flow_edge redefined on
-- PostgreSQL), and a push into a sequence then waits behind the one
-- before it. On PostgreSQL, a sequence's job ended dead by plain SQL
-- holds the job behind it (on_failure block) until sequence_skip. Fair
-- share's tables come empty, and the old database's queued jobs of a
-- queue made fair start by turn between their keys.
local jr = require "jr"
local cjson = require "cjson"

local function old_jobs(env)
  local past, later = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts, flow,
                      parents_left, locked_by, locked_until, last_error,
                      died_at, finished_at)
    VALUES ('m18.a', '{"n": 1}', 'default', 'queued', %s, 0, 1, 0, NULL, NULL, NULL, NULL, NULL),
           ('m18.b', '{"n": 2}', 'default', 'waiting', %s, 0, 0, 1, NULL, NULL, NULL, NULL, NULL),
           ('m18.a', '{"n": 3}', 'mail', 'running', %s, 1, 0, 0, 'old-runner', %s, NULL, NULL, NULL),
           ('m18.a', '{"n": 4}', 'default', 'dead', %s, 4, 0, 0, NULL, NULL, 'boom', %s, %s),
           ('m18.a', '{"n": 5}', 'default', 'cancelled', %s, 0, 0, 0, NULL, NULL, NULL, NULL, %s),
           ('m18.a', '{"n": 6}', 'default', 'completed', %s, 1, 0, 0, NULL, NULL, NULL, NULL, %s)
  ]]):format(past, past, past, later, past, past, past, past, past, past, past))
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
  local pg = backend == "postgres"
  describe(backend .. ": migration 18 (sequences)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-14 database with its jobs intact; sequences work on it", function()
      jr.make_schema(env, 14)
      old_jobs(env)
      assert.is_nil(columns(env).sequence_key)
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      local cols = columns(env)
      assert.is_true(cols.sequence_key and cols.seq_no and cols.seq_fail)
      assert.are.equal(0, #env:query("SELECT id FROM jobs WHERE sequence_key IS NOT NULL" ..
                                     " OR seq_no IS NOT NULL OR seq_fail IS NOT NULL"))
      out, err, code = env:cli("sequences", "--json")
      assert.are.equal(0, code, err)
      assert.are.same({}, cjson.decode(out))
      -- a push into a sequence: the first is queued, the second waits
      local s1 = env:push("m18.s", nil, "--sequence", "k")
      local s2 = env:push("m18.s", nil, "--sequence", "k")
      assert.are.equal("queued", env:job(s1).state)
      assert.are.equal("waiting", env:job(s2).state)
      if not pg then return end
      -- the old dependency: its parent ending readies the child
      env:exec("UPDATE jobs SET state = 'completed', finished_at = now() WHERE id = 1")
      assert.are.equal("queued", env:job(2).state)
      -- a sequence's head ended dead by SQL holds the job behind it
      env:exec(("UPDATE jobs SET state = 'dead', died_at = now(), finished_at = now()" ..
                " WHERE id = %d"):format(s1))
      assert.are.equal("waiting", env:job(s2).state)
      local rows = env:query("SELECT sequence_skip('k') AS n")
      assert.are.equal(1, tonumber(rows[1].n))
      assert.are.equal("queued", env:job(s2).state)
      -- the SQL producer's sequence() refuses what it cannot take
      out, err, code = jr.sh(("psql -X -q -A -t -v ON_ERROR_STOP=1 %s -c %s"):format(
        jr.quote(jr.pg_url), jr.quote(("SET search_path TO %s; SELECT sequence(%d, 'k')")
          :format(env.schema, s2))))
      assert.are_not.equal(0, code, out)
      assert.truthy(err:find(("job %d is not a queued job of no sequence"):format(s2), 1, true), err)
      out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
    end)

    it("adds fair share's tables to a schema-14 database; its queued jobs start by turn", function()
      jr.make_schema(env, 14)
      local values = {}
      for i = 1, 8 do
        values[#values + 1] = ("('m18.f', '{\"t\": \"%s\", \"n\": %d}', 'fq', 'queued', 0)")
          :format(i <= 6 and "a" or "b", i)
      end
      env:exec("INSERT INTO jobs (name, payload, queue, state, attempts) VALUES " ..
               table.concat(values, ", "))
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      assert.are.equal(0, #env:query("SELECT queue FROM fair_keys"))
      assert.are.equal(0, #env:query("SELECT queue FROM fair_clocks"))
      env:config([[concurrency = 1,
        limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]])
      env:script("m18.f", jr.RECORD .. [[
        return function(job) record("starts", job.payload.t) end]])
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 60, "drained")
      local starts = jr.lines(env.dir .. "/starts")
      assert.are.equal(8, #starts)
      -- in push order b would be last; by turn, both of b's are in the
      -- first four
      local b = 0
      for i = 1, 4 do b = b + (starts[i] == "b" and 1 or 0) end
      assert.are.equal(2, b, table.concat(starts, " "))
      assert.are.equal(2, #env:query("SELECT key FROM fair_keys WHERE queue = 'fq'"))
    end)
  end)
end
