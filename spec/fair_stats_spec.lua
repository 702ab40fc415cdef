-- fair_stats_spec.lua - a fair queue seen (docs/queues.md, "Fair
-- share"), on each backend: stats, GET /api/stats and /metrics give
-- each fair queue's keys with ready jobs, the top ones with their ready
-- and running jobs, weight and share of the starts; at most 10 keys a
-- queue in /metrics. No runner claims: the handler is missing.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " fair queue stats:", function()
    local env = jr.test_env(backend)

    it("shows each key's ready jobs, weight and share in stats, /api/stats and /metrics", function()
      local fair = [[limits = { ["queue:fq"] = { fair = { key = "payload.t",
                                                       weights = { acme = 4 } } } }]]
      env:config(fair)
      assert.equal(0, select(3, env:cli("migrate")))
      local q = jr.client(env)
      local jobs = {}
      for i = 1, 3 do jobs[#jobs + 1] = { "fs.none", { t = "acme" }, { queue = "fq" } } end
      jobs[#jobs + 1] = { "fs.none", { t = "bob" }, { queue = "fq" } }
      for i = 1, 14 do jobs[#jobs + 1] = { "fs.none", { t = "k" .. i }, { queue = "fq" } } end
      assert(q:push_many(jobs))
      q:close()
      assert.equal(0, select(3, env:cli("fair", "set", "fq", "bob", "2")))
      -- weights: acme 4, bob 2, 14 keys of 1: 20 in all
      local out, err, code = env:cli("stats", "--json")
      assert.equal(0, code, err)
      local f = cjson.decode(out).fair.fq
      assert.equal(16, f.keys)
      assert.equal(10, #f.top)
      assert.same({ key = "acme", waiting = 3, running = 0, weight = 4, share = 0.2 }, f.top[1])
      assert.same({ key = "bob", waiting = 1, running = 0, weight = 2, share = 0.1 }, f.top[2])
      out = env:cli("stats")
      assert.matches("fair queue fq: 16 keys with ready jobs", out, 1, true)
      assert.matches("acme%s+ready 3%s+running 0%s+weight 4%s+share 20.0%%", out)
      local base = H.start(env, fair)
      local st, body = H.req(base .. "/api/stats", { token = true })
      assert.equal(200, st, body)
      assert.same(f, cjson.decode(body).fair.fq)
      st, body = H.req(base .. "/metrics", { token = true })
      assert.equal(200, st, body)
      assert.matches('jobrunner_fair_keys{queue="fq"} 16', body, 1, true)
      assert.matches('jobrunner_fair_waiting{queue="fq",key="acme"} 3', body, 1, true)
      local n = 0
      for _ in body:gmatch("\njobrunner_fair_waiting{") do n = n + 1 end
      assert.equal(10, n)
    end)
  end)
end
