-- sequence_tail_spec.lua - sequences (docs/queues.md, "Sequences"), on
-- each backend: a push goes behind the last job of its sequence still
-- there. When the job pushed last was cancelled while it waited and its
-- row is gone since (pruned), the next push waits for the last job still
-- waiting, not the head (on SQLite, which keeps only a sequence's head
-- and last job in its index, jobs_seq_head, it is found by the waits'
-- edges); `jobrunner sequences` counts the jobs between, also behind a
-- job cancelled in the middle; the runner then runs them one at a time
-- in push order.
local jr = require "jr"
local cjson = require "cjson"

local WORKER = jr.RECORD .. [[
  local jobrunner = require "jobrunner"
  return function(job)
    local t0 = jobrunner.now()
    jobrunner.sleep(math.max(0, t0 + 0.02 - jobrunner.now()))
    record("done", ("%d %.6f %.6f"):format(job.payload.n, t0, jobrunner.now()))
  end]]

local function seq_list(env)
  local out, err, code = env:cli("sequences", "--json")
  assert.equal(0, code, err)
  local by = {}
  for _, s in ipairs(cjson.decode(out)) do
    by[s.key] = { head = s.head, state = s.state, jobs = s.jobs, blocked = s.blocked }
  end
  return by
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " sequences, the last job gone:", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("a push waits for the last job still waiting, and they run in order", function()
      local ids = {}
      for n = 1, 3 do
        ids[n] = env:push("tail.s", ('{"n": %d}'):format(n), "--sequence", "t")
      end
      assert.equal(0, select(3, env:cli("cancel", tostring(ids[3]))))
      assert.equal("cancelled", env:job(ids[3]).state)
      env:exec("DELETE FROM jobs WHERE id = " .. ids[3])
      ids[4] = env:push("tail.s", '{"n": 4}', "--sequence", "t")
      assert.equal("waiting", env:job(ids[4]).state)
      local parents = {}
      for _, r in ipairs(env:query("SELECT parent_id FROM job_deps WHERE child_id = "
                                   .. ids[4])) do
        parents[#parents + 1] = r.parent_id
      end
      assert.are.same({ ids[2] }, parents)
      assert.are.same({ t = { head = ids[1], state = "queued", jobs = 3, blocked = false } },
                      seq_list(env))
      -- the one after is behind the new last job
      ids[5] = env:push("tail.s", '{"n": 5}', "--sequence", "t")
      assert.are.same({ { parent_id = ids[4] } },
        env:query("SELECT parent_id FROM job_deps WHERE child_id = " .. ids[5]))
      env:config("concurrency = 4")
      env:script("tail.s", WORKER)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 4 end,
                  60, "the four jobs done")
      assert.equal(0, env:stop())
      local rows = {}
      for _, l in ipairs(jr.lines(env.dir .. "/done")) do
        local n, s, e = l:match("^(%d+) (%S+) (%S+)$")
        rows[#rows + 1] = { n = tonumber(n), s = tonumber(s), e = tonumber(e) }
      end
      table.sort(rows, function(a, b) return a.s < b.s end)
      local order = {}
      for i, r in ipairs(rows) do
        order[i] = r.n
        if i > 1 then assert.is_true(r.s >= rows[i - 1].e, "two ran at once") end
      end
      assert.are.same({ 1, 2, 4, 5 }, order)
      assert.are.same({}, seq_list(env))
    end)

    it("counts the jobs behind a cancelled one, which wait for the job before it", function()
      local ids = {}
      for n = 1, 4 do
        ids[n] = env:push("tail.s", ('{"n": %d}'):format(n), "--sequence", "m")
      end
      assert.equal(0, select(3, env:cli("cancel", tostring(ids[2]))))
      assert.are.same({ m = { head = ids[1], state = "queued", jobs = 3, blocked = false } },
                      seq_list(env))
      ids[5] = env:push("tail.s", '{"n": 5}', "--sequence", "m")
      assert.are.same({ m = { head = ids[1], state = "queued", jobs = 4, blocked = false } },
                      seq_list(env))
      env:config("concurrency = 4")
      env:script("tail.s", WORKER)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 4 end,
                  60, "the four jobs not cancelled done")
      assert.equal(0, env:stop())
      local rows = {}
      for _, l in ipairs(jr.lines(env.dir .. "/done")) do
        local n, st, e = l:match("^(%d+) (%S+) (%S+)$")
        rows[#rows + 1] = { n = tonumber(n), s = tonumber(st), e = tonumber(e) }
      end
      table.sort(rows, function(a, b) return a.s < b.s end)
      local order = {}
      for i, r in ipairs(rows) do
        order[i] = r.n
        if i > 1 then assert.is_true(r.s >= rows[i - 1].e, "two ran at once") end
      end
      assert.are.same({ 1, 3, 4, 5 }, order)
    end)
  end)
end
