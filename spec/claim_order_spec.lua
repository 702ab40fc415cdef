-- claim_order_spec.lua - the order in which claims hand jobs out: one
-- queue in priority, run_at, id order; two queues with jobs in turn,
-- whatever their priorities; a paused queue left alone while the one
-- other queue runs. PostgreSQL claims the common case (every queue served
-- uncapped, one queue not paused) with a lighter statement than the fair
-- one: these protect that it picks the same jobs in the same order.
local jr = require "jr"

local client = jr.client

-- A handler that records "queue id" as it starts.
local RECORDER = jr.RECORD .. [[
  return function(job) record("order", job.queue .. " " .. job.id) end
]]

local function order(env)
  local out = {}
  for i, l in ipairs(jr.lines(env.dir .. "/order")) do
    local queue, id = l:match("^(%S+) (%d+)$")
    out[i] = {queue = queue, id = tonumber(id)}
  end
  return out
end

local function wait_ran(env, n, what)
  jr.wait_for(function() return #jr.lines(env.dir .. "/order") >= n end, 20,
    what)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": claim order", function()
    local env = jr.test_env(backend)

    it("one queue: jobs start by priority, then run_at, then id", function()
      env:config("concurrency = 1")
      env:script("rec", RECORDER)
      local q = client(env)
      -- pushed first (the smallest id) but due last: after the batch's
      -- jobs of its priority, by run_at
      local due_late = assert(q:push("rec", {}, {priority = 0, run_in = 0.3}))
      local prio, batch = {[due_late] = 0}, {}
      for i = 1, 30 do
        batch[i] = {"rec", {}, {priority = (i * 7) % 5}}
      end
      local ids = assert(q:push_many(batch))
      q:close()
      for i, id in ipairs(ids) do prio[id] = (i * 7) % 5 end
      jr.sleep(0.4)
      env:start()
      wait_ran(env, 31, "all 31 jobs ran")
      env:stop()
      local got = order(env)
      local function rank(id)   -- due_late goes after its priority's batch
        return prio[id] * 1e9 + (id == due_late and 1e8 or id)
      end
      for i = 2, #got do
        local a, b = got[i - 1], got[i]
        assert.is_true(rank(a.id) < rank(b.id),
          ("job %d (priority %d) ran before job %d (priority %d)")
            :format(a.id, prio[a.id], b.id, prio[b.id]))
      end
    end)

    it("two queues with jobs take turns, whatever their priorities", function()
      env:config("concurrency = 1")
      env:script("rec", RECORDER)
      local q = client(env)
      local batch = {}
      for i = 1, 20 do
        batch[i] = {"rec", {}, {queue = "urgent", priority = -10}}
        batch[20 + i] = {"rec", {}, {queue = "lazy", priority = 10}}
      end
      assert(q:push_many(batch))
      q:close()
      env:start()
      wait_ran(env, 40, "all 40 jobs ran")
      env:stop()
      local got, lazy = order(env), 0
      for i = 1, 10 do
        if got[i].queue == "lazy" then lazy = lazy + 1 end
      end
      assert.is_true(lazy >= 4, ("the lazy queue ran %d of the first 10 "
        .. "jobs: it should take turns with the urgent one"):format(lazy))
    end)

    it("a paused queue is left alone while the one other queue runs", function()
      env:config("concurrency = 2")
      env:script("rec", RECORDER)
      local q = client(env)
      local batch = {}
      for i = 1, 5 do
        batch[i] = {"rec", {}, {queue = "held", priority = -5}}
        batch[5 + i] = {"rec", {}, {}}
      end
      assert(q:push_many(batch))
      q:close()
      local _, err, code = env:cli("queue", "pause", "held")
      assert.are.equal(0, code, err)
      env:start()
      wait_ran(env, 5, "the default queue's 5 jobs ran")
      jr.sleep(0.3)
      for _, j in ipairs(order(env)) do
        assert.are.equal("default", j.queue)
      end
      assert.are.equal(5, #env:jobs("queue = 'held' AND state = 'queued'"))
      _, err, code = env:cli("queue", "resume", "held")
      assert.are.equal(0, code, err)
      wait_ran(env, 10, "the held queue's jobs ran once resumed")
      env:stop()
    end)
  end)
end
