-- fair_after_spec.lua - a fair queue's job pushed with `after` parents
-- (docs/queues.md, "Fair share"; docs/workflows.md) waits until they end,
-- and a job not ready takes no turn of its key: it holds no tag while it
-- waits (its push's turn given back), so its key's ready jobs are tagged
-- as if the waiting ones were not there; once its parents end it is
-- queued untagged and the next claim tags it. A single push (q:push with
-- after) and a batch (q:flow, after by ref) alike. A run starts the key's
-- ready jobs in turn with another key's, and each child once, after its
-- parent. Both engines; asserts stored rows and the order of starts.
local jr = require "jr"
local fr = require "fairrows"
local rows, key_n, index_of = fr.rows, fr.key_n, fr.index_of

-- Records "start N" in file "starts"; a job with gate = true holds its
-- worker until file "gate" exists. Each takes 10 ms, so that a worker's
-- claims take one job each (master/claimq.c claims ahead jobs under 5 ms).
local WORKER = jr.RECORD .. [[
  local now = require("jobrunner").now
  return function(job)
    local dir = os.getenv("PWD")
    local t = now() + 0.01
    require("jobrunner").sleep(math.max(0, t - now()))
    record("starts", tostring(job.payload.n))
    if job.payload.gate then
      for _ = 1, 2400 do
        local g = io.open(dir .. "/gate")
        if g then g:close() return end
        os.execute("sleep 0.05")
      end
    end
  end]]

local function count(t, v)
  local c = 0
  for _, x in ipairs(t) do c = c + (x == v and 1 or 0) end
  return c
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " fair queue, a job waiting for its parents:", function()
    local env
    before_each(function()
      env = jr.env(backend)
      env:config([[concurrency = 2,
        limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]])
      local out, err, code = env:cli("migrate")
      assert.equal(0, code, out .. err)
    end)
    after_each(function() env:cleanup() end)

    local function push(q, t, n, o, gate)
      o = o or {}
      o.queue = "fq"
      return assert(q:push("fa.w", { t = t, n = n, gate = gate }, o))
    end

    it("takes no turn of its key: a job of the key pushed after is next", function()
      local q = jr.client(env)
      local p = push(q, "a", 1)
      push(q, "a", 2, { after = { p } })
      push(q, "a", 3, { after = { p } })
      push(q, "a", 4)
      push(q, "b", 5)
      q:close()
      assert.are.same({ { "queued", 0 }, { "waiting", "-" }, { "waiting", "-" },
                        { "queued", 1 }, { "queued", 0 } }, rows(env))
      assert.equal(2, key_n(env, "a"))    -- jobs 1 and 4 took a's turns
    end)

    it("pushed in a batch takes no turn either", function()
      local q = jr.client(env)
      local function j(ref, t, n, after)
        return { ref = ref, name = "fa.w", payload = { t = t, n = n },
                 queue = "fq", after = after }
      end
      assert(q:flow({ jobs = { j("p", "a", 1), j("c1", "a", 2, { "p" }),
                               j("x", "b", 3), j("c2", "a", 4, { "c1" }),
                               j("y", "a", 5) } }))
      push(q, "a", 6)
      q:close()
      assert.are.same({ { "queued", 0 }, { "waiting", "-" }, { "queued", 0 },
                        { "waiting", "-" }, { "queued", 1 }, { "queued", 2 } },
                      rows(env))
      assert.equal(3, key_n(env, "a"))
    end)

    it("leaves its key's ready jobs their turns; runs after its parent, once", function()
      local q = jr.client(env)
      local p = push(q, "a", 1, {}, true)
      for n = 2, 4 do push(q, "a", n, { after = { p } }) end
      for n = 5, 7 do push(q, "a", n) end
      for n = 8, 10 do push(q, "b", n) end
      q:close()
      local r = rows(env)
      for n = 2, 4 do assert.are.same({ "waiting", "-" }, r[n]) end
      assert.are.same({ "queued", 1 }, r[5])    -- not behind 2 to 4
      env:script("fa.w", WORKER)
      env:start()
      -- the parent holds one worker; the other runs every ready job
      jr.wait_for(function() return #jr.lines(env.dir .. "/starts") == 7 end,
                  60, "the ready jobs started")
      local starts = jr.lines(env.dir .. "/starts")
      local all = table.concat(starts, " ")
      for n = 2, 4 do assert.is_nil(index_of(starts, tostring(n)), all) end
      -- a's ready jobs go in turn with b's: a's first before b's last
      assert.is_true(index_of(starts, "5") < index_of(starts, "10"), all)
      assert.is_true(index_of(starts, "6") < index_of(starts, "10"), all)
      jr.write_file(env.dir .. "/gate", "")
      jr.wait_for(function() return #jr.lines(env.dir .. "/starts") == 10 end,
                  60, "every job started")
      jr.wait_for(function() return env:count() == 0 end, 30, "every job done")
      assert.equal(0, env:stop())
      starts = jr.lines(env.dir .. "/starts")
      all = table.concat(starts, " ")
      for n = 1, 10 do assert.equal(1, count(starts, tostring(n)), all) end
      for n = 2, 4 do
        assert.is_true(index_of(starts, "1") < index_of(starts, tostring(n)), all)
      end
    end)
  end)
end
