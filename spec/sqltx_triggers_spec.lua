-- sqltx_triggers_spec.lua - a handler's jobrunner.sql statements are
-- plain SQL run on the runner's connection, which keeps the schema's
-- triggers off while they are its own (conn.c); they run with them when
-- they name the jobs table. A row they make dead gets its died_at
-- (jobs_died_at, jobs_died_at_set: migration 44), since `dead list`,
-- `dead retry --all` and the dead prune read dead jobs through it: before,
-- such a job counted in `stats` and `queue list` but `dead list` said "no
-- dead jobs" and `dead retry --all` requeued none. A job they push into
-- a queue no job used before makes the queue known (jobs_queue_known), so
-- that claims see it and it runs. SQLite only (PostgreSQL's triggers run
-- for every session).
local jr = require "jr"

local KILLER = [[
  local jobrunner = require "jobrunner"
  return function(job)
    jobrunner.sql("UPDATE jobs SET state = 'dead', last_error = 'killed' WHERE id = $1",
                  job.payload.victim)
    jobrunner.sql("INSERT INTO jobs (name, queue, state, last_error)"
                  .. " VALUES ('r44.ins', 'held', 'dead', 'inserted')")
  end]]

for _, backend in ipairs(jr.backends()) do
  if backend == "sqlite" then
    describe("sqlite: a handler's jobrunner.sql statements", function()
      local env
      before_each(function() env = jr.env(backend) end)
      after_each(function() env:cleanup() end)

      it("give a job they make dead its died_at: dead list and dead retry --all see it", function()
        env:config("concurrency = 1")
        env:script("r44.killer", KILLER)
        local out, err, code = env:cli("migrate")
        assert.are.equal(0, code, out .. err)
        out, err, code = env:cli("queue", "pause", "held")
        assert.are.equal(0, code, out .. err)
        local pushed = env:cli("push", "r44.victim", "--queue", "held")
        local victim = math.tointeger(tonumber(pushed:match("%d+")))
        out, err, code = env:cli("push", "r44.killer", ('{"victim": %d}'):format(victim))
        assert.are.equal(0, code, out .. err)
        env:start()
        jr.wait_for(function()
          return #env:query("SELECT id FROM jobs WHERE state = 'dead'") == 2
        end, 60, "the two jobs made dead by the handler's statements")
        assert.equal(0, env:stop())
        assert.are.same({}, env:query("SELECT id FROM jobs WHERE state = 'dead' AND died_at IS NULL"))
        local list = env:cli("dead", "list", "--json")
        assert.truthy(list:find(('"id":%d'):format(victim), 1, true), list)
        assert.truthy(list:find('"r44.ins"', 1, true), list)
        out, err, code = env:cli("dead", "retry", "--all")
        assert.are.equal(0, code, out .. err)
        assert.truthy(out:find("requeued 2 dead jobs", 1, true), out)
      end)

      it("make a queue they push into known", function()
        env:config("concurrency = 1")
        env:script("r44.pusher", [[
          local jobrunner = require "jobrunner"
          return function(job)
            jobrunner.sql("INSERT INTO jobs (name, queue) VALUES ('r44.child', 'r44.new')")
          end]])
        env:script("r44.child", jr.RECORD .. [[
          return function(job) record("done", "child") end]])
        local out, err, code = env:cli("push", "r44.pusher")
        assert.are.equal(0, code, out .. err)
        env:start()
        jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 1 end,
                    30, "the job the handler pushed run")
        assert.equal(0, env:stop())
        assert.are.same({ { name = "r44.new" } },
          env:query("SELECT name FROM queues WHERE name = 'r44.new'"))
      end)
    end)
  end
end
