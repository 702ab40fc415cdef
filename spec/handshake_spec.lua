-- handshake_spec.lua - a worker gets its settings from the master: it never
-- reads jobrunner.lua itself, so the config's globals do not leak into
-- handlers and a config file changed or broken after the start does not
-- reach new workers; a config backoff function still sets the delay of a
-- retry the worker decides.
local jr = require "jr"

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

-- jobrunner.lua with Lua before its return: prelude, then the env's table
-- plus extra fields.
local function config_with(env, prelude, extra)
  env:config(extra)
  local f = assert(io.open(env.config_file))
  local text = f:read("a")
  f:close()
  write(env.config_file, prelude .. "\n" .. text)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " worker handshake:", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("keeps the config file's globals out of handlers' _ENV", function()
      config_with(env, "leak = 1\nfunction helper() return 2 end",
        "concurrency = 1")
      env:script("probe", [[
        return { max_retries = 0, handle = function(job)
          if leak ~= nil or helper ~= nil then
            error("config global visible in a handler: leak = " ..
                  tostring(leak) .. ", helper = " .. tostring(helper))
          end
        end }
      ]])
      env:start()
      local id = env:push("probe")
      jr.wait_for(function() return env:count() == 0 or
        (env:job(id) or {}).state == "dead" end, 20, "probe ran")
      local row = env:job(id)
      assert.is_nil(row, row and row.last_error)
    end)

    it("starts new workers without reading jobrunner.lua again", function()
      env:config("concurrency = 1, max_jobs_per_worker = 1")
      env:script("one", "return function() end")
      env:start()
      local first = env:push("one")
      jr.wait_for(function() return env:job(first) == nil end, 20, "first job")
      -- a worker that read the runner's config now would fail its set-up;
      -- the CLI pushes with a copy of the good one
      local f = assert(io.open(env.config_file))
      local good = f:read("a")
      f:close()
      local runners = env.config_file
      env.config_file = env.dir .. "/push.lua"
      write(env.config_file, good)
      write(runners, "error('jobrunner.lua read after the start')\n")
      local ids = { env:push("one"), env:push("one"), (env:push("one")) }
      jr.wait_for(function()
        for _, id in ipairs(ids) do
          if env:job(id) ~= nil then return false end
        end
        return true
      end, 20, "jobs run by fresh workers")
      assert.not_matches("read after the start", env:log(), 1, true)
    end)

    it("applies a config backoff function to a handler's failure", function()
      env:config("concurrency = 1, backoff = function(job, attempt, err) " ..
        "return job.name == 'flaky' and attempt == 1 and " ..
        "err:find('boom', 1, true) and 5000 or 1 end")
      env:script("flaky", "return function() error('boom') end")
      env:start()
      local id = env:push("flaky")
      local row = jr.wait_for(function()
        local r = env:job(id)
        return r and r.state == "queued" and r.attempts == 1 and r
      end, 20, "retry queued")
      assert.is_true(row.run_at - row.db_now > 4000,
        ("retry in %gs, not about 5000s"):format(row.run_at - row.db_now))
    end)

    it("applies defaults.backoff given as a number", function()
      env:config("concurrency = 1, defaults = { backoff = 3000 }")
      env:script("flaky", "return function() error('boom') end")
      env:start()
      local id = env:push("flaky")
      local row = jr.wait_for(function()
        local r = env:job(id)
        return r and r.state == "queued" and r.attempts == 1 and r
      end, 20, "retry queued")
      local d = row.run_at - row.db_now
      assert.is_true(d > 2900 and d <= 3001, ("retry in %gs, not 3000s"):format(d))
    end)
  end)
end
