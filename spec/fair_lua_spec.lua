-- fair_lua_spec.lua - a fair queue's weights changed at run time from
-- Lua (docs/queues.md, "Fair share"), on each backend: a hook's
-- jobrunner.limits.set gives the queue new weights for this runner's
-- next claims, limits.get shows them, and the fair key stays the
-- config's. One worker records the starts in order, no timings.
local jr = require "jr"

local WORKER = jr.RECORD .. [[
  return function(job) record("starts", job.payload.t) end]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " fair weights from Lua:", function()
    local env = jr.test_env(backend)

    it("takes the weights a hook sets with jobrunner.limits.set, not its key", function()
      env:config(([[concurrency = 1,
        limits = { ["queue:fq"] = { fair = { key = "payload.t", weights = { acme = 1 } } } },
        hooks = { on_start = function()
          local limits = require "jobrunner.limits"
          local f = io.open(%q, "a")
          local ok, err = limits.set("queue:fq", { fair = { key = "payload.other" } })
          f:write(tostring(ok), " ", tostring(err), "\n")
          assert(limits.set("queue:fq", { fair = { weights = { acme = 4 } } }))
          local fair = limits.get("queue:fq").fair
          f:write(fair.key, " ", fair.weights, " ", fair.default, "\n")
          f:close()
        end }]]):format(env.dir .. "/seen"))
      env:script("fair.w", WORKER)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/seen") >= 2 end, 30, "hook ran")
      local seen = jr.lines(env.dir .. "/seen")
      assert.equal("nil jobrunner.limits.set: 'limits.queue:fq.fair.key' is set in the config " ..
                   "only: a fair queue's key (its weights and default change here, or with " ..
                   "jobrunner fair set)", seen[1])
      assert.equal('payload.t {"acme":4} 1', seen[2])
      -- the weights reach the database at this runner's next claim (and
      -- tag what is pushed after): a probe job at a time until they have
      local q = jr.client(env)
      jr.wait_for(function()
        -- counted before the push: a probe may start before its return
        local n = #jr.lines(env.dir .. "/starts")
        assert(q:push("fair.w", { t = "probe" }, { queue = "fq" }))
        jr.wait_for(function() return #jr.lines(env.dir .. "/starts") > n end,
          30, "a probe ran")
        local w = env:query("SELECT cweight FROM fair_keys WHERE queue = 'fq' AND key = 'acme'")
        return w[1] and tonumber(w[1].cweight) == 4
      end, 30, "acme's weight 4 recorded")
      local jobs = {}
      for i = 1, 150 do jobs[#jobs + 1] = { "fair.w", { t = "other" }, { queue = "fq" } } end
      for i = 1, 150 do jobs[#jobs + 1] = { "fair.w", { t = "acme" }, { queue = "fq" } } end
      assert(q:push_many(jobs))
      q:close()
      local function starts()
        local t = {}
        for _, l in ipairs(jr.lines(env.dir .. "/starts")) do
          if l ~= "probe" then t[#t + 1] = l end
        end
        return t
      end
      jr.wait_for(function() return #starts() == 300 end, 60, "drained")
      local acme = 0
      for i, t in ipairs(starts()) do
        if i <= 150 and t == "acme" then acme = acme + 1 end
      end
      -- 4:1 over the backlog: 120 of the first 150 (at the config's 1:1, 75)
      assert.is_true(acme >= 110 and acme <= 126, "acme had " .. acme .. " of 150")
    end)
  end)
end
