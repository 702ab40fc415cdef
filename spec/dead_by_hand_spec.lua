-- dead_by_hand_spec.lua - a job plain SQL makes dead dies when that
-- UPDATE runs (jobs_died_at_set, migration 44). A first form gave
-- it the updated_at the row already had: a job queued three days before
-- and made dead by hand had died three days ago, and a runner whose
-- retention.dead is a day pruned it at its next prune, seconds later. A
-- finished_at or updated_at the UPDATE sets is still taken. SQLite only.
local jr = require "jr"

for _, backend in ipairs(jr.backends()) do
  if backend == "sqlite" then
    describe("sqlite: a job plain SQL makes dead", function()
      local env
      before_each(function() env = jr.env(backend) end)
      after_each(function() env:cleanup() end)

      it("dies at the UPDATE's time and stays past the dead retention's next prune", function()
        env:config("concurrency = 1, retention = { dead = '1d' }")
        local out, err, code = env:cli("migrate")
        assert.are.equal(0, code, out .. err)
        local now = os.time()
        local days3 = now - 3 * 86400
        env:exec(("INSERT INTO jobs (id, name, queue, run_at, created_at, updated_at)"
          .. " VALUES (1, 'r44.old', 'held', %d, %d, %d),"
          .. " (2, 'r44.old', 'held', %d, %d, %d),"
          .. " (3, 'r44.old', 'held', %d, %d, %d)"):format(
          days3, days3, days3, days3, days3, days3, days3, days3, days3))
        env:exec("UPDATE jobs SET state = 'dead', last_error = 'by hand' WHERE id = 1")
        env:exec("UPDATE jobs SET state = 'dead', updated_at = 77 WHERE id = 2")
        env:exec("UPDATE jobs SET state = 'dead', finished_at = 88, updated_at = 99 WHERE id = 3")
        local rows = env:query("SELECT id, died_at AS d FROM jobs ORDER BY id")
        assert.is_true(rows[1].d >= now - 5 and rows[1].d <= os.time() + 5, tostring(rows[1].d))
        assert.are.same({ { id = 2, d = 77 }, { id = 3, d = 88 } }, { rows[2], rows[3] })
        env:start()
        jr.wait_for(function()
          return #env:query("SELECT id FROM jobs WHERE id IN (2, 3)") == 0
        end, 60, "jobs 2 and 3, dead since 1970, pruned")
        assert.equal(0, env:stop())
        assert.are.same({ { id = 1 } }, env:query("SELECT id FROM jobs"))
        local list = env:cli("dead", "list", "--json")
        assert.truthy(list:find('"id":1', 1, true), list)
      end)
    end)
  end
end
