-- aging_stats_spec.lua - what `stats` shows of an aging queue
-- (docs/queues.md, "Priority aging"), on each backend: per queue with
-- priority_aging, its period and its ready jobs counted by effective
-- priority, the next to run first, with the lowest stored priority of
-- each; jobs not due yet and queues that do not age are left out. No
-- runner: the jobs stay where they were pushed.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " priority aging in stats:", function()
    local env = jr.test_env(backend)

    it("lists an aging queue's ready jobs by effective priority", function()
      env:config([[limits = { ["queue:aq"] = { priority_aging = "60s" } }]])
      local q = jr.client(env)
      local now = os.time()
      -- an hour old at priority 10: 60 levels, effective -50
      assert(q:push("x", {}, { queue = "aq", priority = 10, run_at = now - 3600 }))
      -- two minutes and a half old at 5 (effective 3), fresh at 3 and 4
      assert(q:push("x", {}, { queue = "aq", priority = 5, run_at = now - 150 }))
      assert(q:push("x", {}, { queue = "aq", priority = 3 }))
      assert(q:push("x", {}, { queue = "aq", priority = 4 }))
      -- not due: not ready; another queue: does not age
      assert(q:push("x", {}, { queue = "aq", priority = 0, run_at = now + 3600 }))
      assert(q:push("x", {}, { queue = "other", priority = 0 }))
      q:close()
      local out, err, code = env:cli("stats", "--json")
      assert.equal(0, code, err)
      local aging = cjson.decode(out).aging
      assert.are.same({ "aq" }, (function()
        local t = {}
        for k in pairs(aging) do t[#t + 1] = k end
        return t
      end)())
      assert.equal(60, aging.aq.every)
      assert.are.same({
        { effective_priority = -50, jobs = 1, lowest_priority = 10 },
        { effective_priority = 3, jobs = 2, lowest_priority = 3 },
        { effective_priority = 4, jobs = 1, lowest_priority = 4 },
      }, aging.aq.levels)
      out, err, code = env:cli("stats")
      assert.equal(0, code, err)
      assert.matches("aging queue aq: a level every 60s waited", out, 1, true)
      assert.matches("effective priority %-50%s+ready 1%s+lowest stored priority 10", out)
      local base = H.start(env, [[limits = { ["queue:aq"] = { priority_aging = "60s" } }]])
      local st, body = H.req(base .. "/api/stats", { token = true })
      assert.equal(200, st, body)
      assert.same(aging, cjson.decode(body).aging)
    end)

    it("says an aging queue has no job ready, and stats --json has aging {} without one", function()
      env:config([[limits = { ["queue:aq"] = { priority_aging = "30s" } }]])
      local _, err0, code0 = env:cli("migrate")
      assert.equal(0, code0, err0)
      local out, err, code = env:cli("stats")
      assert.equal(0, code, err)
      assert.matches("aging queue aq: a level every 30s waited, no job ready", out, 1, true)
      env:config("")
      out, err, code = env:cli("stats", "--json")
      assert.equal(0, code, err)
      assert.are.same({}, cjson.decode(out).aging)
    end)
  end)
end
