-- reload_spec.lua - handlers change under a running runner: inotify,
-- SIGHUP and `jobrunner reload` start a new generation only if all of it
-- loads; jobs run whole on one generation, which their row records.
local jr = require "jr"
local cjson = require "cjson"

local function lines(path)
  local t = {}
  local f = io.open(path)
  if not f then return t end
  for l in f:lines() do t[#t + 1] = l end
  f:close()
  return t
end

local function recorder(version)
  return ([[
    local jobrunner = require "jobrunner"
    return function(job)
      local t = jobrunner.now() + 0.01
      while jobrunner.now() < t do end
      local f = assert(io.open(os.getenv("PWD") .. "/ledger", "a"))
      f:write("%s ", job.id, "\n")
      f:close()
    end]]):format(version)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " reload:", function()
    local env = jr.test_env(backend, { config = "concurrency = 2" })

    it("switches a draining stream to edited code; every job runs once", function()
      env:script("rec", recorder("v1"))
      env:start()
      -- a stream: 300 jobs inserted at once, edited while they drain
      if backend == "postgres" then
        env:exec("INSERT INTO jobs (name) SELECT 'rec' FROM generate_series(1, 300)")
      else
        env:exec("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300) INSERT INTO jobs (name) SELECT 'rec' FROM c")
      end
      jr.wait_for(function() return #lines(env.dir .. "/ledger") >= 30 end)
      env:script("rec", recorder("v2"))
      jr.wait_for(function() return env:count() == 0 end, 60)
      local seen, order = {}, lines(env.dir .. "/ledger")
      for _, l in ipairs(order) do
        local v, id = l:match("^(v%d) (%d+)")
        assert.is_nil(seen[id], "job " .. id .. " ran twice")
        seen[id] = v
      end
      local n = 0
      for _ in pairs(seen) do n = n + 1 end
      assert.equal(300, n)
      assert.matches("^v2 ", order[#order])            -- later jobs: new code
      assert.matches("reloaded: generation", env:log())
    end)

    it("records the generation that ran each attempt", function()
      env:script("fail", "return { max_retries = 0, handle = function() error('v1') end }")
      env:start()
      local a = env:push("fail")
      jr.wait_for(function() local r = env:job(a); return r and r.state == "dead" end)
      env:script("fail", "return { max_retries = 0, handle = function() error('v2') end }")
      jr.wait_for(function() return env:log():find("reloaded: generation") end)
      local b = env:push("fail")
      jr.wait_for(function() local r = env:job(b); return r and r.state == "dead" end)
      local ra, rb = env:job(a), env:job(b)
      assert.matches("^%x+$", ra.generation)
      assert.matches("^%x+$", rb.generation)
      assert.are_not.equal(ra.generation, rb.generation)
      local dead = cjson.decode((env:cli("dead", "list", "--json")))
      local gens = {}
      for _, d in ipairs(dead) do gens[d.id] = d.generation end
      assert.equal(ra.generation, gens[a])
      assert.equal(rb.generation, gens[b])
    end)

    it("keeps the old code when the new code has a syntax error, and recovers", function()
      env:script("h", [[return function(job)
        local f = assert(io.open(os.getenv("PWD") .. "/out." .. job.id, "w"))
        f:write("old") f:close() end]])
      env:script("other", "return function() end")
      env:start()
      env:script("h", "return function(job)\n  local x = = 1\nend\n")
      jr.wait_for(function() return env:log():find("reload failed") end)
      assert.matches("h.lua:2:", env:log())
      local id = env:push("h")
      jr.wait_file(env.dir .. "/out." .. id)
      assert.equal("old", jr.read_file(env.dir .. "/out." .. id))
      env:script("h", [[return function(job)
        local f = assert(io.open(os.getenv("PWD") .. "/out." .. job.id, "w"))
        f:write("new") f:close() end]])
      jr.wait_for(function() return env:log():find("reloaded: generation") end)
      id = env:push("h")
      jr.wait_file(env.dir .. "/out." .. id)
      assert.equal("new", jr.read_file(env.dir .. "/out." .. id))
    end)

    it("claims a handler added at run time, and stops claiming a removed one", function()
      env:script("base", "return function() end")
      env:start()
      local early = env:push("added")
      env:script("added", "return function() end")
      jr.wait_for(function() return env:job(early) == nil end)
      env:remove_script("added")
      jr.wait_for(function()
        local _, n = env:log():gsub("reloaded: generation", "")
        return n >= 2
      end)
      local late = env:push("added")
      -- a job pushed after it, with a handler, runs: claims take ready jobs
      -- in id order, so had "added" been claimable it would have gone first
      local after = env:push("base")
      jr.wait_for(function() return env:job(after) == nil end)
      local row = env:job(late)
      assert.equal("queued", row.state)
      assert.equal(0, row.attempts)
      assert.same({ "added" }, env:stats().unhandled)
    end)

    it("reloads on SIGHUP and on `jobrunner reload` with the watch off", function()
      env:config("concurrency = 1, watch = false")
      env:script("v", [[return function(job)
        local f = assert(io.open(os.getenv("PWD") .. "/v." .. job.id, "w"))
        f:write("1") f:close() end]])
      env:start()
      env:script("v", [[return function(job)
        local f = assert(io.open(os.getenv("PWD") .. "/v." .. job.id, "w"))
        f:write("2") f:close() end]])
      local id = env:push("v")
      jr.wait_file(env.dir .. "/v." .. id)
      assert.equal("1", jr.read_file(env.dir .. "/v." .. id))   -- no watch
      env:signal("HUP")
      jr.wait_for(function() return env:log():find("reloaded: generation") end)
      id = env:push("v")
      jr.wait_file(env.dir .. "/v." .. id)
      assert.equal("2", jr.read_file(env.dir .. "/v." .. id))
      env:script("v", [[return function(job)
        local f = assert(io.open(os.getenv("PWD") .. "/v." .. job.id, "w"))
        f:write("3") f:close() end]])
      local out, err, code = env:cli("reload")
      assert.equal(0, code, err)
      assert.matches("reload", out)
      jr.wait_for(function()
        local _, n = env:log():gsub("reloaded: generation", "")
        return n >= 2
      end)
      id = env:push("v")
      jr.wait_file(env.dir .. "/v." .. id)
      assert.equal("3", jr.read_file(env.dir .. "/v." .. id))
    end)

    it("says clearly when there is no runner to reload", function()
      local _, err, code = env:cli("reload")
      assert.is_not.equal(0, code)
      assert.matches("no runner", err)
    end)
  end)
end
