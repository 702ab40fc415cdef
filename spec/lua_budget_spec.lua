-- lua_budget_spec.lua - Lua that never ends or fails in odd ways stays
-- confined to its file, job or call: a handler file that loops while
-- loading, a broken config on reload, a config backoff that loops in the
-- master, discard/snooze under pcall, error objects that describe
-- themselves badly.
local jr = require "jr"

local function q(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- Runs the CLI under a wall-clock guard: a hang fails the test instead of
-- stalling the suite. Returns stdout, stderr, status (124 on timeout).
local function cli_guarded(env, secs, ...)
  local args = { "cd", q(env.dir), "&&", "timeout", "-s", "KILL", tostring(secs),
                 q(jr.bin), "-c", q(env.config_file) }
  for _, a in ipairs({ ... }) do args[#args + 1] = q(a) end
  return jr.sh(table.concat(args, " "))
end

local LOOP = "local x = 0\nwhile true do x = x + 1 end\n"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " Lua budgets:", function()
    local env = jr.test_env(backend)

    it("a handler file that never finishes loading is that file's error; the others run", function()
      env:script("loop", LOOP)
      env:script("ok", "return function() end")
      env:start()
      jr.wait_for(function() return env:log():find("loop.lua:2:") end, 20,
                  "load error of loop.lua")
      assert.matches("instructions", env:log())
      local id = env:push("ok")
      jr.wait_for(function() return env:job(id) == nil end, 20, "ok job done")
    end)

    it("a reload stuck in a looping file fails; the fixed file reloads on the next SIGHUP", function()
      env:script("ok", "return function() end")
      env:start()
      env:script("later", LOOP)
      env:signal("HUP")
      jr.wait_for(function() return env:log():find("reload failed") end, 30,
                  "failed reload")
      assert.matches("later.lua:2:", env:log())
      env:script("later", "return function() end")
      env:signal("HUP")
      jr.wait_for(function() return env:log():find("reloaded: generation") end, 30,
                  "reload of the fixed file")
      local id = env:push("later")
      jr.wait_for(function() return env:job(id) == nil end, 20, "later job done")
    end)

    it("check names a looping handler file and stats answers without loading handlers", function()
      env:script("loop", LOOP)
      env:script("ok", "return function() end")
      local _, _, code = env:cli("migrate")
      assert.equal(0, code)
      local out, err, status = cli_guarded(env, 60, "check")
      assert.are_not.equal(124, status, "check hung")
      assert.are_not.equal(0, status)
      assert.matches("loop.lua:2:", out .. err)
      out, err, status = cli_guarded(env, 60, "stats", "--json")
      assert.are_not.equal(124, status, "stats hung")
      assert.equal(0, status, err)
    end)

    it("stats runs no handler code", function()
      env:script("marker", [[
        local f = assert(io.open(os.getenv("PWD") .. "/ran", "w"))
        f:close()
        return function() end]])
      env:script("syn", "return function(\n")
      local _, _, code = env:cli("migrate")
      assert.equal(0, code)
      env:exec("INSERT INTO jobs (name) VALUES ('marker')")
      env:exec("INSERT INTO jobs (name) VALUES ('syn')")
      local s = env:stats()
      assert.is_nil(io.open(env.dir .. "/ran"), "stats ran a handler file")
      assert.is_true(s.names.marker.handler)
      assert.same({ "syn" }, s.unhandled)
    end)

    it("a reload whose worker is stuck outside Lua while loading fails after load_timeout", function()
      env:config("load_timeout = 1")
      env:script("ok", "return function() end")
      env:start()
      os.execute("mkfifo " .. q(env.dir .. "/fifo"))
      -- opening a FIFO nobody writes blocks in C, where no budget reaches
      env:script("stuck", "io.open(os.getenv('PWD') .. '/fifo')\nreturn function() end")
      env:signal("HUP")
      jr.wait_for(function() return env:log():find("reload failed") end, 30,
                  "failed reload")
      assert.matches("did not finish loading", env:log():match("reload failed[^\n]*"))
      assert.matches("stuck.lua: did not finish loading within 1s", env:log(), 1, true)
      local id = env:push("ok")
      jr.wait_for(function() return env:job(id) == nil end, 20, "ok job done")
    end)

    it("check names a handler file stuck outside Lua after load_timeout", function()
      env:config("load_timeout = 1")
      os.execute("mkfifo " .. q(env.dir .. "/fifo"))
      env:script("stuck", "io.open(os.getenv('PWD') .. '/fifo')\nreturn function() end")
      local out, err, status = cli_guarded(env, 60, "check")
      assert.are_not.equal(124, status, "check hung")
      assert.equal(3, status)
      assert.matches("stuck.lua: did not finish loading within 1s", out .. err, 1, true)
    end)

    it("a failed reload of a broken config keeps the old generation running", function()
      env:script("ok", "return function() end")
      env:start()
      local f = assert(io.open(env.config_file, "a"))
      f:write("this is not lua\n")
      f:close()
      env:signal("HUP")
      jr.wait_for(function() return env:log():find("reload failed") end, 30,
                  "failed reload")
      assert.matches("jobrunner.lua:%d+:", env:log():match("reload failed[^\n]*"))
      -- the CLI would refuse the broken config too: insert with SQL
      env:exec("INSERT INTO jobs (name) VALUES ('ok')")
      jr.wait_for(function() return env:count() == 0 end, 20, "ok job done")
    end)

    it("a config backoff that loops is interrupted in the master, which still stops on TERM", function()
      env:config("backoff = function() while true do end end")
      -- the handler kills its own worker: the master decides the retry
      env:script("die", "return function() os.execute('kill -KILL $PPID') end")
      env:start()
      local id = env:push("die")
      local row = jr.wait_for(function()
        local r = env:job(id)
        return r and r.state == "queued" and r.attempts == 1 and r
      end, 30, "retry recorded")
      assert.matches("worker died", row.last_error)
      assert.matches("backoff failed[^\n]*instructions", env:log())
      local st = env:stop("TERM", nil, 30)
      assert.equal(0, st, env:log())
    end)

    it("a config backoff that loops is interrupted in the worker too", function()
      env:config("backoff = function() while true do end end")
      env:script("fail", "return function() error('boom') end")
      env:start()
      local id = env:push("fail")
      jr.wait_for(function()
        local r = env:job(id)
        return r and r.state == "queued" and r.attempts == 1
      end, 30, "retry recorded")
      assert.matches("backoff failed[^\n]*instructions", env:log())
    end)

    it("discard under pcall still discards the job", function()
      env:script("d", [[
        local jobrunner = require "jobrunner"
        return function() pcall(jobrunner.discard, "not wanted") end]])
      env:start()
      local id = env:push("d")
      local row = env:wait_state(id, "dead", 20)
      assert.matches("not wanted", row.last_error)
    end)

    it("snooze under pcall still snoozes the job", function()
      env:script("s", [[
        local jobrunner = require "jobrunner"
        return function() pcall(jobrunner.snooze, 300) end]])
      env:start()
      local id = env:push("s")
      local row = jr.wait_for(function()
        local r = env:job(id)
        return r and r.state == "queued" and r.run_at - r.db_now > 100 and r
      end, 20, "snoozed")
      assert.equal(0, row.attempts)
    end)

    it("snooze with no delay waits the minimum delay", function()
      env:script("s", [[
        local jobrunner = require "jobrunner"
        return function() jobrunner.snooze() end]])
      env:start()
      local id = env:push("s")
      -- from the time the snooze was recorded (the spec may look late);
      -- a job just pushed is queued too, with run_at its push's time
      local sql = (backend == "postgres"
        and "SELECT state, extract(epoch FROM run_at - updated_at)::float8 AS d FROM jobs WHERE id = "
        or "SELECT state, run_at - updated_at AS d FROM jobs WHERE id = ") .. id
      local d = jr.wait_for(function()
        local r = env:query(sql)[1]
        return r and r.state == "queued" and r.d > 0 and r.d
      end, 20, "snoozed")
      assert.is_true(d > 0.99, "snoozed for " .. d .. " s, less than the minimum 1 s")
    end)

    it("a job that snoozes every time fails past max_snoozes", function()
      env:config("max_snoozes = 2")
      env:script("s", [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function() jobrunner.snooze(0) end }]])
      env:start()
      local id = env:push("s")
      local row = env:wait_state(id, "dead", 30)
      assert.matches("snoozed more than 2 times", row.last_error)
    end)

    it("an error object whose __tostring returns a number is described as the table it is", function()
      env:script("e", [[
        return { max_retries = 0, handle = function()
          error(setmetatable({}, { __tostring = function() return 42 end }))
        end }]])
      env:start()
      local id = env:push("e")
      local row = env:wait_state(id, "dead", 20)
      assert.matches("table value", row.last_error)
      assert.not_matches("number value", row.last_error)
    end)

    it("a snooze or discard signal prints as what it is", function()
      env:script("p", [[
        local jobrunner = require "jobrunner"
        return function()
          local _, e = pcall(jobrunner.discard, "why")
          jobrunner.log("info", "signal=" .. tostring(e))
        end]])
      env:start()
      local id = env:push("p")
      env:wait_state(id, "dead", 20)
      local line = env:log():match("signal=[^\n]*")
      assert.matches("discard", line)
      assert.not_matches("0x", line)
    end)
  end)
end
