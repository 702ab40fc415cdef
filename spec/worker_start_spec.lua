-- worker_start_spec.lua - workers that cannot start (their set-up fails
-- before any handler loads) are replaced with backoff; why is logged once
-- per reason, not at each replacement, and shown by `jobrunner stats` and
-- /api/runner until a worker starts again.
local jr = require "jr"
local jrhttp = require "jrhttp"
local cjson = require "cjson"

-- The live child processes of pid: its workers.
local function children(pid)
  local f = io.open(("/proc/%d/task/%d/children"):format(pid, pid))
  local t = {}
  if not f then return t end
  for kid in f:read("a"):gmatch("%d+") do t[#t + 1] = tonumber(kid) end
  f:close()
  return t
end

local function count(text, pattern)
  local _, n = text:gsub(pattern, "")
  return n
end

local HTTP = ('http = { listen = "127.0.0.1:0", token = %q }'):format(
  jrhttp.TOKEN)

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " workers that cannot start:", function()
    local env = jr.test_env(backend)

    it("say why once over several respawns, in stats and /api/runner, " ..
       "until one starts", function()
      env:config('concurrency = 1, watch = false, log = { level = "debug" }, ' ..
                 HTTP)
      env:script("ok", [[return function(job)
        local f = assert(io.open(os.getenv("PWD") .. "/ok." .. job.id, "w"))
        f:write("1") f:close() end]])
      local p = env:start()
      local url = "http://127.0.0.1:" .. jr.wait_for(function()
        return env:log():match("http: listening on http://127%.0%.0%.1:(%d+)/")
      end, 10, "http listening")
      -- the scripts directory goes away: a replacement cannot load
      assert(os.rename(env.dir .. "/scripts", env.dir .. "/away"))
      local w = jr.wait_for(function() return children(p.pid)[1] end, 10)
      os.execute("kill -9 " .. w)
      jr.wait_for(function()
        return count(env:log(), "worker %d+ started %(pid") >= 4
      end, 60, "three replacements")
      local log = env:log()
      assert.equal(1, count(log, "workers cannot start"), log)
      assert.matches("workers cannot start %b(), the running generation " ..
                     "goes on: scripts directory '[^']*/scripts'", log)
      assert.is_nil(log:find("exit 0%) while idle"), log)
      local st = env:stats()
      assert.matches("^scripts directory '[^']*/scripts'",
                     st.workers_cannot_start)
      local out = env:cli("stats")
      assert.matches("workers cannot start: scripts directory", out)
      local r = jrhttp.json(url .. "/api/runner")
      assert.matches("^scripts directory", r.workers_cannot_start)
      -- back: the next replacement starts, and the state goes
      assert(os.rename(env.dir .. "/away", env.dir .. "/scripts"))
      jr.wait_for(function()
        return env:log():find("workers start again")
      end, 60, "a worker started")
      assert.equal(cjson.null, env:stats().workers_cannot_start)
      assert.is_nil(env:cli("stats"):find("cannot start"))
      assert.equal(cjson.null,
                   jrhttp.json(url .. "/api/runner").workers_cannot_start)
      local id = env:push("ok")
      jr.wait_file(env.dir .. "/ok." .. id, 60)
      assert.equal(0, env:stop())
    end)

    it("say why when a handler that loaded fails in a new worker, and give " ..
       "it no job of that handler", function()
      env:config('concurrency = 1, watch = false, log = { level = "debug" }')
      env:script("flaky", [[
        local f = io.open(os.getenv("PWD") .. "/flag")
        if f then f:close(); error("flaky today") end
        return function(job)
          local out = assert(io.open(os.getenv("PWD") .. "/ran." .. job.id, "a"))
          out:write("ran\n") out:close()
        end]])
      local p = env:start()
      local flag = env.dir .. "/flag"
      assert(io.open(flag, "w")):close()
      local w = jr.wait_for(function() return children(p.pid)[1] end, 10)
      os.execute("kill -9 " .. w)
      local id = env:push("flaky")
      jr.wait_for(function()
        return env:log():find("workers cannot start", 1, true)
      end, 30, "the reason logged")
      jr.wait_for(function()
        return count(env:log(), "worker %d+ started %(pid") >= 4
      end, 60, "three replacements")
      local log = env:log()
      assert.equal(1, count(log, "workers cannot start"), log)
      assert.matches("the running generation goes on: [^\n]*/scripts/" ..
                     "flaky%.lua:2: flaky today", log)
      assert.is_nil(log:find("no handler for", 1, true), log)
      assert.matches("flaky%.lua:2: flaky today",
                     env:stats().workers_cannot_start)
      assert.equal(0, math.tointeger(env:job(id).attempts))
      -- it loads again: the job runs, once
      os.remove(flag)
      jr.wait_file(env.dir .. "/ran." .. id, 60)
      jr.wait_for(function() return env:job(id) == nil or
        env:job(id).state == "completed" end, 30)
      assert.truthy(env:log():find("workers start again", 1, true))
      assert.equal(1, #jr.lines(env.dir .. "/ran." .. id))
      assert.equal(0, env:stop())
    end)
  end)
end
