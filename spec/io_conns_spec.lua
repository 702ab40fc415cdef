-- io_conns_spec.lua - jobrunner.http keeps its connections while the
-- requests in flight dip: a worker's connection cache holds as many as
-- its handlers' inflight (libcurl's own cache shrinks to four times the
-- requests in flight as they end), so a second wave of jobs no larger
-- than the first reuses the first one's connections and opens none. The
-- server (bench/slowhttp) counts the connections it accepts. A request
-- made while every connection is busy skips libcurl's look for an idle
-- one (it walks them all): a wave larger than the last opens only the
-- connections the idle ones cannot serve. Under an open files limit below
-- what it keeps, the worker keeps fewer idle connections and says so: a
-- job after a wave can still open a file.
local jr = require "jr"

local slow_server = require("rawhttp").slow

-- A counter of the server's; each call is a connection of its own, which
-- /accepts counts too.
local function get(url)
  return tonumber(jr.sh("curl -s " .. url):match("%d+"))
end

local function push_many(env, n, url)
  local q = assert(require("jobrunner").open(env.url, { schema = env.schema }))
  local batch = {}
  for i = 1, n do batch[i] = { "get", { url = url } } end
  assert(q:push_many(batch))
  q:close()
end

local GET = [[
local jobrunner = require "jobrunner"
return { inflight = 200, handle = function(job)
  local r, err = jobrunner.http{ url = job.payload.url }
  assert(r, err)
  assert(r.status == 200, "got " .. tostring(r.status))
end }]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " jobrunner.http connections:", function()
    local env = jr.test_env(backend)

    it("reuses the first wave's connections for a second one", function()
      local base, stop = slow_server(500)
      finally(stop)
      env:config("concurrency = 1")
      env:script("get", GET)
      push_many(env, 200, base .. "/x")
      get(base .. "/reset")
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 120, "wave 1")
      -- every request ended: in flight went from the first wave's peak to
      -- none, and the worker waits idle with its connections
      local peak = get(base .. "/peak")
      local before = get(base .. "/accepts")
      local opened = before - 2   -- less the calls to /peak and /accepts
      assert.is_true(peak >= 2, "peak " .. peak)
      assert.is_true(opened >= peak, opened .. " opened for " .. peak)
      push_many(env, peak, base .. "/x")
      jr.wait_for(function() return env:count() == 0 end, 120, "wave 2")
      assert.equal(200 + peak, get(base .. "/count"))
      -- the calls to /count and /accepts are the only new connections
      assert.equal(before + 2, get(base .. "/accepts"),
                   "connections opened by the second wave of " .. peak)
      assert.equal(0, env:count("dead"))
      assert.equal(0, env:stop())
    end)

    it("opens for a larger wave only what its idle connections cannot serve",
       function()
      local base, stop = slow_server(1000)
      finally(stop)
      env:config("concurrency = 1")
      env:script("get", GET)
      push_many(env, 60, base .. "/x")
      get(base .. "/reset")
      env:start()
      jr.wait_for(function() return env:count() == 0 end, 120, "wave 1")
      local before = get(base .. "/accepts")
      local idle = before - 1     -- less the call to /accepts
      assert.is_true(idle >= 2 and idle <= 60, idle .. " opened for 60")
      -- 150 jobs, inflight 200: the idle connections serve as many, and
      -- the others open one each at most (fewer when a request ends
      -- before the last starts); a request told to skip the look while
      -- an idle connection waited would open more
      push_many(env, 150, base .. "/x")
      jr.wait_for(function() return env:count() == 0 end, 120, "wave 2")
      assert.equal(60 + 150, get(base .. "/count"))
      -- less the calls to /count and /accepts
      local opened = get(base .. "/accepts") - before - 2
      assert.is_true(opened <= 150 - idle, opened .. " opened by a wave of "
                     .. "150 with " .. idle .. " idle connections")
      assert.is_true(opened >= 1, "none opened for 150 with " .. idle)
      assert.equal(0, env:count("dead"))
      assert.equal(0, env:stop())
    end)

    it("keeps fewer idle connections under a low open files limit, so a job "
       .. "can still open a file", function()
      local base, stop = slow_server(300)
      finally(stop)
      env:config("concurrency = 1")
      env:script("get", [[
local jobrunner = require "jobrunner"
return { inflight = 1000, max_retries = 0, handle = function(job)
  assert(jobrunner.http{ url = job.payload.url })
end }]])
      env:script("file", [[
return { inflight = 1000, handle = function(job)
  local f = assert(io.open(os.getenv("PWD") .. "/opened", "w"))
  f:write("1")
  f:close()
end }]])
      -- 200 open files: 136 idle connections at most, 64 left
      env:start("ulimit -n 200;")
      push_many(env, 300, base .. "/x")
      jr.wait_for(function()
        return env:count_in("queued", "running") == 0
      end, 120, "the wave")
      assert.matches("keeps 136 idle connections at most, not 1000: its "
                     .. "open files limit is 200", env:log(), 1, true)
      -- the requests past the limit failed, naming it; the others ran
      local dead = env:count("dead")
      assert.is_true(dead < 300, dead .. " of 300 dead")
      for _, j in ipairs(env:jobs("state = 'dead'")) do
        assert.matches("Too many open files", j.last_error, 1, true)
      end
      assert.is_true(get(base .. "/count") >= 300 - dead)
      env:push("file")
      jr.wait_file(env.dir .. "/opened", 60)
      jr.wait_for(function()
        return env:count_in("queued", "running") == 0
      end, 60, "the file job")
      assert.equal(dead, env:count("dead"))
      assert.equal(0, env:stop())
    end)
  end)
end
