-- state_redteam_spec.lua - the runner's state file beside its pid file
-- (PIDFILE.state, "workers cannot start: REASON") against what another
-- user could plant in that directory: a FIFO there must not hang `stats`,
-- a symlink must not make `stats` show the file it points to, control
-- bytes in the reason must not reach the terminal raw (escape sequences),
-- a killed runner's pid file whose pid is another's now names no runner
-- (stats showed its stale reason, reload sent that process SIGHUP), and
-- a hard link planted at the runner's temporary name must not have
-- its target overwritten. The file is the runner's, not the engine's:
-- SQLite only.
local jr = require "jr"

local q = jr.quote

-- The live child processes of pid: its workers.
local function children(pid)
  local f = io.open(("/proc/%d/task/%d/children"):format(pid, pid))
  local t = {}
  if not f then return t end
  for kid in f:read("a"):gmatch("%d+") do t[#t + 1] = tonumber(kid) end
  f:close()
  return t
end

describe("the runner's state file, planted by another:", function()
  local env = jr.test_env("sqlite")

  local function state_path() return env.dir .. "/jobs.db.pid.state" end

  -- `stats` (text) bounded by timeout(1): stdout, stderr, status.
  local function stats(...)
    local args = { "timeout", "20", q(jr.bin), "-c", q(env.config_file),
                   "stats" }
    for _, a in ipairs({ ... }) do args[#args + 1] = q(a) end
    return jr.sh("cd " .. q(env.dir) .. " && " .. table.concat(args, " "))
  end

  it("a FIFO at PIDFILE.state does not hang stats", function()
    env:script("ok", "return function() end")
    env:start()
    assert(os.execute("mkfifo " .. q(state_path())))
    local out, err, code = stats()
    assert.equal(0, code, err)
    assert.matches("queued 0", out)
    assert.is_nil(out:find("cannot start", 1, true))
    out, err, code = stats("--json")
    assert.equal(0, code, err)
    assert.matches('"workers_cannot_start":null', out, 1, true)
    assert.equal(0, env:stop())
  end)

  it("a symlink at PIDFILE.state is not followed by stats", function()
    env:script("ok", "return function() end")
    env:start()
    jr.write_file(env.dir .. "/secret", "workers cannot start: secret\n")
    assert(os.execute(("ln -s %s %s"):format(q(env.dir .. "/secret"),
                                             q(state_path()))))
    local out, err, code = stats()
    assert.equal(0, code, err)
    assert.is_nil(out:find("secret", 1, true), out)
    assert.equal(0, env:stop())
  end)

  it("control bytes of the reason reach the terminal escaped", function()
    env:script("ok", "return function() end")
    env:start()
    jr.write_file(state_path(), "workers cannot start: a\27[2J\27]0;x\7b\r" ..
                  "c\n")
    local out, err, code = stats()
    assert.equal(0, code, err)
    assert.matches("workers cannot start: a\\x1b[2J\\x1b]0;x\\x07b\\rc\n",
                   out, 1, true)
    assert.is_nil(out:find("[\27\7\r]"), out)
    -- JSON carries the reason as it is, escaped by JSON itself
    assert.equal("a\27[2J\27]0;x\7b\rc", env:stats().workers_cannot_start)
    assert.equal(0, env:stop())
  end)

  it("a killed runner's pid file, its pid now another's, names no runner",
     function()
    env:script("ok", "return function() end")
    local p = env:start()
    jr.write_file(state_path(), "workers cannot start: stale\n")
    os.execute("kill -9 " .. p.pid)
    jr.wait_for(function() return not env:alive(p) end, 20, "runner gone")
    -- its pid given to another process since: a sleep stands for it
    local other = tonumber(jr.sh("sleep 120 >/dev/null 2>&1 & echo $!")
                           :match("%d+"))
    jr.write_file(env.dir .. "/jobs.db.pid", other .. "\n")
    local out, err, code = stats()
    assert.equal(0, code, err)
    assert.is_nil(out:find("stale", 1, true), out)
    out, err, code = env:cli("reload")
    assert.not_equal(0, code, out)
    assert.matches("does not hold its lock", err, 1, true)
    -- the stranger was not sent SIGHUP (which would have ended it)
    assert.truthy(os.execute("kill -0 " .. other))
    os.execute("kill " .. other)
  end)

  it("a hard link at the runner's temporary name keeps its target",
     function()
    env:config('concurrency = 1, watch = false')
    env:script("ok", "return function() end")
    local p = env:start()
    local victim = env.dir .. "/victim"
    jr.write_file(victim, "root:x:0:0:root:/root:/bin/bash\n")
    assert(os.execute(("ln %s %s"):format(q(victim),
                                          q(state_path() .. ".tmp"))))
    -- the scripts directory goes away: a replacement cannot start
    assert(os.rename(env.dir .. "/scripts", env.dir .. "/away"))
    local w = jr.wait_for(function() return children(p.pid)[1] end, 10)
    os.execute("kill -9 " .. w)
    jr.wait_for(function()
      return (jr.read_file(state_path()) or ""):find("cannot start")
    end, 60, "the state file written")
    assert.equal("root:x:0:0:root:/root:/bin/bash\n", jr.read_file(victim))
    assert.matches("^scripts directory", env:stats().workers_cannot_start)
    assert(os.rename(env.dir .. "/away", env.dir .. "/scripts"))
    assert.equal(0, env:stop())
  end)
end)
