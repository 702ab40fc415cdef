-- red44_handler_dead_spec.lua - a handler's jobrunner.sql statements are
-- plain SQL run on the runner's connection, which keeps the schema's
-- triggers off while they are its own (conn.c). A row they make dead
-- must still get its died_at (jobs_died_at, jobs_died_at_set: migration
-- 44), since `dead list`, `dead retry --all` and the dead prune read dead
-- jobs through it: before the fix such a job counted in `stats` and
-- `queue list` but `dead list` said "no dead jobs" and `dead retry --all`
-- requeued none. SQLite only (PostgreSQL has no such triggers).
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
    describe("sqlite: a job a handler's statements make dead", function()
      local env
      before_each(function() env = jr.env(backend) end)
      after_each(function() env:cleanup() end)

      it("has its died_at: dead list and dead retry --all see it", function()
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
    end)
  end
end
