-- systemd_spec: the runner under systemd, without systemd. Its notify
-- protocol (sd_notify) is checked against a plain datagram socket
-- (spec/helpers/notifyrecv.c, built here): READY=1 only once the handlers
-- loaded, RELOADING=1 then READY=1 around a reload, STOPPING=1 on stop,
-- WATCHDOG=1 at half of WATCHDOG_USEC, the abstract namespace, a bad
-- NOTIFY_SOCKET. Then the units of examples/systemd, installed by
-- `make install`, go through `systemd-analyze verify` when it exists.
local h = require "jr"
local q = h.quote

local recv_bin

-- Builds the receiver once into a temp dir.
local function receiver()
  if recv_bin then return recv_bin end
  local dir = h.sh("mktemp -d /tmp/jrnotify.XXXXXX"):gsub("%s+$", "")
  recv_bin = dir .. "/notifyrecv"
  local cc = os.getenv("CC") or "cc"
  local _, err, code = h.sh(("%s -std=c11 -o %s %s"):format(cc, q(recv_bin),
    q(h.root .. "/spec/helpers/notifyrecv.c")))
  assert(code == 0, "cannot build notifyrecv: " .. err)
  return recv_bin
end

-- Starts a receiver bound at addr (a path or @name) for env; returns the
-- file its datagrams go to, one per line, each after "1 " or "0 ": whether
-- the file mark existed when it arrived.
local recv_pid
local function listen(env, addr, mark)
  local out = env.dir .. "/notify.log"
  local pidf = env.dir .. "/notifyrecv.pid"
  os.execute(("%s %s %s 25 %s >/dev/null 2>&1 & echo $! > %s"):format(
    q(receiver()), q(addr), q(out), q(mark or "/nonexistent"), q(pidf)))
  recv_pid = h.read_file(pidf):match("%d+")
  h.wait_for(function() return h.read_file(out) end, 5, "notify socket bound")
  return out
end

local function stop_listen()
  if recv_pid then os.execute("kill " .. recv_pid .. " 2>/dev/null") end
  recv_pid = nil
end

-- The datagrams received so far: { {i = 1, mark = bool, msg = "A=1|B"}, ...}.
local function messages(file)
  local t = {}
  for _, l in ipairs(h.lines(file)) do
    t[#t + 1] = { i = #t + 1, mark = l:sub(1, 1) == "1", msg = l:sub(3) }
  end
  return t
end

local function find(file, pattern, from)
  for i, m in ipairs(messages(file)) do
    if i >= (from or 1) and m.msg:find(pattern) then return m end
  end
end

for _, backend in ipairs(h.backends()) do
  describe(backend .. ": systemd notifications", function()
    local env = h.test_env(backend)

    after_each(stop_listen)

    it("sends READY=1 only after the database was reached and the handlers loaded", function()
      local mark = env.dir .. "/loaded"
      -- loading takes a while and leaves a mark once done
      env:script("hello", ([[
        os.execute("sleep 0.3")
        io.open(%q, "w"):close()
        return function(job) end]]):format(mark))
      local file = listen(env, env.dir .. "/notify.sock", mark)
      env:start("NOTIFY_SOCKET=" .. q(env.dir .. "/notify.sock"))
      local m = h.wait_for(function() return find(file, "^READY=1") end,
        10, "READY=1")
      assert.is_true(m.mark, "READY=1 came before the handlers loaded")
      assert.matches("STATUS=generation %x+, 1 handler", m.msg)
      assert.equal(1, m.i, "READY=1 is the first message")
      local id = env:push("hello", "{}")
      h.wait_for(function() return env:job(id) == nil end, 20, "job done")
      assert.equal(0, env:stop())
      assert.truthy(find(file, "^STOPPING=1"), "no STOPPING=1 on SIGTERM")
    end)

    it("says RELOADING=1 then READY=1 around a reload, also a failed one", function()
      env:config("watch = false")     -- reloads on SIGHUP only
      env:script("hello", "return function(job) end")
      local file = listen(env, env.dir .. "/notify.sock")
      env:start("NOTIFY_SOCKET=" .. q(env.dir .. "/notify.sock"))
      h.wait_for(function() return find(file, "^READY=1") end, 10, "READY=1")
      env:script("hello", "return function(job) return 1 end")
      env:signal("HUP")
      local r = h.wait_for(function() return find(file, "^RELOADING=1") end,
        10, "RELOADING=1").i
      assert.matches("MONOTONIC_USEC=%d+", messages(file)[r].msg)
      h.wait_for(function() return find(file, "^READY=1", r + 1) end, 10,
        "READY=1 after the reload")
      env:script("hello", "return function(job) syntax error")
      env:signal("HUP")
      -- a worker of the first reload may start one more reload of its own
      -- (b6ee5e4): the failed one is the RELOADING=1 last sent once the
      -- log says it failed
      h.wait_for(function() return env:log():find("reload failed") end, 10,
        "reload failed")
      local r2
      for i = r + 1, #messages(file) do
        if messages(file)[i].msg:find("^RELOADING=1") then r2 = i end
      end
      assert.is_number(r2, "no RELOADING=1 for the failed reload")
      h.wait_for(function() return find(file, "^READY=1", r2 + 1) end, 10,
        "READY=1 after the failed reload")
    end)

    it("sends WATCHDOG=1 at half of WATCHDOG_USEC, over an abstract socket", function()
      local addr = ("@jrspec-%d-%d"):format(os.time(), math.random(1, 1e9))
      env:script("hello", ([[
        return function(job)
          local f = io.open(%q, "w")
          f:write(tostring(os.getenv("NOTIFY_SOCKET")), " ",
                  tostring(os.getenv("WATCHDOG_USEC")))
          f:close()
        end]]):format(env.dir .. "/worker_env"))
      local file = listen(env, addr)
      env:start(("NOTIFY_SOCKET=%s WATCHDOG_USEC=200000"):format(q(addr)))
      h.wait_for(function()
        local n = 0
        for _, m in ipairs(messages(file)) do
          if m.msg == "WATCHDOG=1" then n = n + 1 end
        end
        return n >= 3
      end, 10, "three WATCHDOG=1")
      -- the workers do not inherit the runner's notify socket
      env:push("hello", "{}")
      h.wait_file(env.dir .. "/worker_env")
      assert.equal("nil nil", h.read_file(env.dir .. "/worker_env"))
    end)

    it("sends no WATCHDOG=1 when WATCHDOG_PID names another process", function()
      env:script("hello", "return function(job) end")
      local file = listen(env, env.dir .. "/notify.sock")
      env:start(("NOTIFY_SOCKET=%s WATCHDOG_USEC=100000 WATCHDOG_PID=1"):format(
        q(env.dir .. "/notify.sock")))
      h.wait_for(function() return find(file, "^READY=1") end, 10, "READY=1")
      h.sleep(0.3)
      assert.is_nil(find(file, "^WATCHDOG=1"))
    end)

    it("warns about a NOTIFY_SOCKET it cannot use and runs jobs anyway", function()
      env:script("hello", "return function(job) end")
      env:start("NOTIFY_SOCKET=relative/sock")
      assert.matches("NOTIFY_SOCKET 'relative/sock': not an absolute path",
        env:log())
      local id = env:push("hello", "{}")
      h.wait_for(function() return env:job(id) == nil end, 20, "job done")
    end)
  end)
end

describe("systemd units", function()
  local prefix

  lazy_setup(function()
    prefix = h.sh("mktemp -d /tmp/jrsystemd.XXXXXX"):gsub("%s+$", "")
    -- no DESTDIR: verify checks that ExecStart's binary exists
    local _, err, code = h.sh(("cd %s && env -u MAKEFLAGS -u MFLAGS " ..
      "-u MAKELEVEL -u BUILD -u SANITIZE make -s install PREFIX=%s"):format(
      q(h.root), q(prefix)))
    assert(code == 0, "make install failed: " .. err)
  end)

  lazy_teardown(function()
    if prefix then os.execute("rm -rf " .. q(prefix)) end
  end)

  it("are installed under PREFIX with ExecStart at the installed binary", function()
    local dir = prefix .. "/lib/systemd/system/"
    for _, u in ipairs({ "jobrunner.service", "jobrunner@.service" }) do
      local text = assert(h.read_file(dir .. u), u .. " not installed")
      assert.matches("\nType=notify\n", text)
      assert.matches("\nExecStart=" .. prefix:gsub("%p", "%%%0") ..
        "/bin/jobrunner %-c ", text)
      assert.matches("\nExecReload=/bin/kill %-HUP %$MAINPID\n", text)
      for _, k in ipairs({ "NoNewPrivileges=yes", "ProtectSystem=strict",
                           "PrivateTmp=yes", "User=jobrunner",
                           "ReadWritePaths=/var/lib/jobrunner" }) do
        assert.truthy(text:find("\n" .. k, 1, true), u .. " lacks " .. k)
      end
    end
    assert.truthy(h.read_file(prefix .. "/lib/sysusers.d/jobrunner.conf"))
  end)

  it("pass systemd-analyze verify", function()
    local _, _, has = h.sh("command -v systemd-analyze")
    if has ~= 0 then
      print("systemd_spec: systemd-analyze not found, units not verified")
      return
    end
    local dir = prefix .. "/lib/systemd/system/"
    -- a template is verified through an instance of it
    os.execute(("cp %s %s"):format(q(dir .. "jobrunner@.service"),
      q(prefix .. "/jobrunner@spec.service")))
    for _, u in ipairs({ dir .. "jobrunner.service",
                         prefix .. "/jobrunner@spec.service" }) do
      local out, err, code = h.sh("systemd-analyze verify --man=no " .. q(u))
      assert.equal(0, code, err)
      -- unknown keys are only warned about: none may name our units
      assert.is_nil((out .. err):find("jobrunner", 1, true), out .. err)
    end
  end)
end)
