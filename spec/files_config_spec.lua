-- files_config_spec.lua - what the files around a runner cannot do to it:
-- symlinks under scripts/ (cycles, links out of the tree), out-of-range
-- config and handler values, a hostile or stale pid file, `check` naming
-- the real cause, and readers that must not create a database.
local jr = require "jr"

local q = jr.quote

-- Runs a shell command in env's directory, under a time limit.
local function sh_in(env, cmd)
  return jr.sh(("cd %s && %s"):format(q(env.dir), cmd))
end

-- The CLI under `timeout`, so a hang fails the spec instead of stalling it.
local function cli_limited(env, seconds, ...)
  local args = { "cd", q(env.dir), "&&", "timeout", "-s", "KILL",
                 tostring(seconds), q(jr.bin), "-c", q(env.config_file) }
  for _, a in ipairs({ ... }) do args[#args + 1] = q(a) end
  return jr.sh(table.concat(args, " "))
end

-- A pid that no process has: one of a shell that has exited.
local function dead_pid()
  local out = jr.sh("sh -c 'echo $$'")
  return tonumber(out:match("%d+"))
end

local first_backend = jr.backends()[1]

describe("scripts directory symlinks:", function()
  local env
  before_each(function()
    env = jr.env(first_backend, { config = "concurrency = 1" })
    env:script("ok", "return function() end")
    env:script("sub.inner", "return function() end")
  end)
  after_each(function() env:cleanup() end)

  it("check skips a symlink cycle, names the links and loads the rest", function()
    sh_in(env, "ln -s . scripts/loop && ln -s .. scripts/up && ln -s .. scripts/sub/back")
    local out, err, code = cli_limited(env, 30, "check")
    assert.equal(0, code, err)
    assert.matches("2 handlers loaded: ok, sub.inner", out, 1, true)
    assert.matches("scripts/loop", err, 1, true)
    assert.matches("scripts/up", err, 1, true)
    assert.matches("scripts/sub/back", err, 1, true)
    assert.matches("skipped", err, 1, true)
  end)

  it("does not load files through a symlink to a directory outside scripts/", function()
    sh_in(env, "mkdir outside && printf 'return function() end' > outside/x.lua && " ..
          "ln -s ../outside scripts/ext")
    local out, err, code = cli_limited(env, 30, "check")
    assert.equal(0, code, err)
    assert.not_matches("ext.x", out, 1, true)
    assert.matches("scripts/ext", err, 1, true)
    assert.matches("outside", err, 1, true)
  end)

  it("follows a symlink to a directory inside scripts/ once, the real one first", function()
    sh_in(env, "ln -s sub scripts/alias")
    local out, err, code = cli_limited(env, 30, "check")
    assert.equal(0, code, err)
    assert.matches("2 handlers loaded: ok, sub.inner", out, 1, true)
    assert.matches("scripts/alias", err, 1, true)
  end)

  it("run with a cycle under scripts/ loads, runs jobs, watches and stops on SIGTERM", function()
    sh_in(env, "ln -s . scripts/loop && ln -s .. scripts/up")
    env:start()
    assert.matches("loaded 2 handlers", env:log(), 1, true)
    assert.matches("scripts/loop", env:log(), 1, true)
    local id = env:push("ok")
    jr.wait_for(function() return env:job(id) == nil end, 20, "job done")
    -- the watcher walks the same tree: a change still reloads
    env:script("later", "return function() end")
    jr.wait_for(function() return env:log():find("reloaded", 1, true) end, 20, "reload")
    assert.equal(0, env:stop("TERM", nil, 30))
  end)
end)

describe("config ranges:", function()
  local env = jr.test_env(first_backend)

  local bad = {
    { "lease = 1e308", "lease" },
    { "poll_interval = 1e308", "poll_interval" },
    { "poll_interval = 0.0001", "poll_interval" },
    { "shutdown_timeout = 1e308", "shutdown_timeout" },
    { "busy_timeout = 1e308", "busy_timeout" },
    { "tick_interval = 1e308", "tick_interval" },
    { "idle_timeout = 1e308", "idle_timeout" },
    { "wait_for_db = 1e308", "wait_for_db" },
    { "defaults = { timeout = 1e308 }", "defaults.timeout" },
    { "defaults = { backoff = 1e308 }", "defaults.backoff" },
    { "defaults = { max_retries = 1e308 }", "defaults.max_retries" },
    { "concurrency = 1e308", "concurrency" },
    { "max_payload = 1e308", "max_payload" },
    { "memory_limit = 1e308", "memory_limit" },
    { "max_jobs_per_worker = 1e308", "max_jobs_per_worker" },
    { "vacuum_every = -1", "vacuum_every" },
    { "lease = 0/0", "lease" },
  }
  for _, case in ipairs(bad) do
    it("refuses " .. case[1] .. " naming the key, file:line and the range", function()
      env:config(case[1])
      local _, err, code = env:cli("check")
      assert.equal(3, code, err)
      assert.matches("jobrunner.lua:%d+: '" .. case[2]:gsub("%.", "%%.") .. "'", err)
      assert.matches("%(.- to .-%)", err)
    end)
  end

  it("accepts the documented example values", function()
    env:config("lease = 30, poll_interval = 1, shutdown_timeout = 25, busy_timeout = 5, " ..
               "tick_interval = 5, idle_timeout = 30, wait_for_db = 60, " ..
               "defaults = { timeout = 900, backoff = 10, max_retries = 20 }")
    local _, err, code = env:cli("check")
    assert.equal(0, code, err)
  end)

  it("refuses out-of-range handler options naming the file and the range", function()
    env:script("big_timeout", "return { timeout = 1e308, handle = function() end }")
    env:script("big_backoff", "return { backoff = 1e308, handle = function() end }")
    env:script("big_retries", "return { max_retries = 1e12, handle = function() end }")
    env:script("fine", "return { timeout = 60, backoff = 5, max_retries = 3, handle = function() end }")
    local out, err, code = env:cli("check")
    assert.equal(3, code, err)
    assert.matches("1 handler loaded: fine", out, 1, true)
    for _, f in ipairs({ "big_timeout", "big_backoff", "big_retries" }) do
      assert.matches("scripts/" .. f .. ".lua: '[%w_]+' .-%(.- to .-%)", err)
    end
  end)
end)

describe("check:", function()
  local env = jr.test_env(first_backend)

  it("names the scripts directory and the real cause when it is missing", function()
    env:config('scripts = "/nonexistent/scripts"')
    -- the config sets scripts twice: the later one wins in Lua
    local _, err, code = env:cli("check")
    assert.equal(3, code, err)
    assert.not_matches("(null)", err, 1, true)
    assert.matches("/nonexistent/scripts", err, 1, true)
    assert.matches("No such file or directory", err, 1, true)
  end)
end)

describe("pid file:", function()
  local env
  before_each(function()
    env = jr.env("sqlite", { config = "concurrency = 1" })
    env:script("ok", "return function() end")
  end)
  after_each(function() env:cleanup() end)

  local function pidfile() return env:sqlite_path() .. ".pid" end

  it("refuses a pid file that is a symlink and leaves its target alone", function()
    jr.write_file(env.dir .. "/precious.conf", "keep me\n")
    sh_in(env, "ln -s precious.conf " .. q(pidfile()))
    local p = env:start(nil, { wait = false })
    jr.wait_for(function() return not env:alive(p) end, 20, "runner exit")
    assert.equal("keep me\n", jr.read_file(env.dir .. "/precious.conf"))
    assert.matches(pidfile(), env:log(p), 1, true)
    assert.matches("symlink", env:log(p), 1, true)
    assert.not_equal(0, env:stop("TERM", p))
  end)

  it("refuses a pid_file that is not a pid file, and leaves it", function()
    jr.write_file(env.dir .. "/victim", "root:x:0:0:root:/root:/bin/sh\n")
    env:config('pid_file = "' .. env.dir .. '/victim"')
    local p = env:start(nil, { wait = false })
    jr.wait_for(function() return not env:alive(p) end, 20, "runner exit")
    assert.equal("root:x:0:0:root:/root:/bin/sh\n", jr.read_file(env.dir .. "/victim"))
    assert.matches("not a jobrunner pid file", env:log(p), 1, true)
  end)

  it("takes over the pid file of a dead runner and removes it at exit", function()
    jr.write_file(pidfile(), dead_pid() .. "\n")
    local p = env:start()
    assert.equal(p.pid, tonumber(jr.read_file(pidfile()):match("%d+")))
    local out, err, code = env:cli("reload")
    assert.equal(0, code, err)
    assert.matches("asked runner " .. p.pid, out, 1, true)
    jr.wait_for(function() return env:log(p):find("reload[:e][d ]") end, 20, "reload done")
    assert.equal(0, env:stop())
    assert.is_nil(jr.read_file(pidfile()))
  end)

  it("a second runner on the same database and pid file refuses to start", function()
    local p1 = env:start()
    local p2 = env:start(nil, { wait = false })
    jr.wait_for(function() return not env:alive(p2) end, 20, "second runner exit")
    assert.matches("already running", env:log(p2), 1, true)
    assert.matches(tostring(p1.pid), env:log(p2), 1, true)
    assert.is_true(env:alive(p1))
    assert.equal(p1.pid, tonumber(jr.read_file(pidfile()):match("%d+")))
    local id = env:push("ok")
    jr.wait_for(function() return env:job(id) == nil end, 20, "job done")
    assert.equal(0, env:stop("TERM", p1))
  end)

  it("does not remove a pid file that was replaced while it ran", function()
    env:start()
    os.remove(pidfile())
    jr.write_file(pidfile(), "someone else's\n")
    assert.equal(0, env:stop())
    assert.equal("someone else's\n", jr.read_file(pidfile()))
  end)

  it("puts the pid file of sqlite://jobs.db next to the database, not at /", function()
    env:config('backend = "sqlite://jobs.db"')
    local p = env:start()
    assert.equal(p.pid, tonumber((jr.read_file(env.dir .. "/jobs.db.pid") or ""):match("%d+")))
    local out, err, code = env:cli("reload")
    assert.equal(0, code, err)
    assert.matches("asked runner " .. p.pid, out, 1, true)
    jr.wait_for(function() return env:log(p):find("reload[:e][d ]") end, 20, "reload done")
    assert.equal(0, env:stop())
  end)
end)

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " readers without a database:", function()
    local env
    before_each(function()
      env = jr.env(backend)
      if backend == "postgres" then
        -- a schema nobody created
        env.schema = env.schema .. "_none"
        env:config("")
      end
    end)
    after_each(function() env:cleanup() end)

    for _, cmd in ipairs({ { "stats" }, { "stats", "--json" }, { "dead", "list" } }) do
      it(table.concat(cmd, " ") .. " says the database does not exist and creates nothing", function()
        local out, err, code = env:cli(table.unpack(cmd))
        assert.equal(4, code, err)
        assert.equal("", out)
        assert.matches("does not exist", err, 1, true)
        if backend == "sqlite" then
          assert.is_nil(jr.read_file(env:sqlite_path()))
        else
          local rows = env:query("SELECT 1") -- schema search path only
          assert.is_table(rows)
          local n = jr.sh(("psql -X -q -A -t %s -c %s"):format(q(jr.pg_url),
            q(("SELECT count(*) FROM pg_namespace WHERE nspname = '%s'"):format(env.schema))))
          assert.equal("0", (n:gsub("%s", "")))
        end
      end)
    end

    it("stats reads a database made by migrate", function()
      local _, err, code = env:cli("migrate")
      assert.equal(0, code, err)
      local out
      out, err, code = env:cli("stats")
      assert.equal(0, code, err)
      assert.matches("queued 0", out, 1, true)
    end)
  end)
end
