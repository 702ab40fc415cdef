-- process_secrets_spec.lua - what the runner's processes show and leave
-- behind: a password never shows in ps, logs or errors whatever its libpq
-- spelling; a handler's subprocesses die with its worker; handler output
-- never blocks a job; a worker starts whatever descriptors it inherits.
local jr = require "jr"

local q = jr.quote

local function pid_alive(pid)
  local stat = jr.read_file("/proc/" .. pid .. "/stat")
  return stat ~= nil and not stat:match("^%d+ %b() [ZX]")
end

-- The runner's command line as ps shows it (NULs as spaces).
local function cmdline(pid)
  return ((jr.read_file("/proc/" .. pid .. "/cmdline") or ""):gsub("%z", " "))
end

-- A prefix for env:start that appends args to the runner's command line
-- (the runner keeps the harness's pid: sh execs it).
local function with_args(...)
  local args = {}
  for _, a in ipairs({ ... }) do args[#args + 1] = q(a) end
  return "sh -c " .. q('exec "$0" "$@" ' .. table.concat(args, " "))
end

local CANARY = "canarypw"

-- Every spelling libpq accepts (or refuses) with a password in it; none
-- reaches a server (host /nonexistent). Each canary word is secret.
local SPELLINGS = {
  { "spaces around =", "host=/nonexistent dbname=x password = canarypw" },
  { "quoted with spaces", "host=/nonexistent dbname=x password='canarypw canarytwo x'" },
  { "escaped space", "host=/nonexistent dbname=x password=canarypw\\ canarytwo" },
  { "percent-encoded key in a URL", "postgresql:///x?host=/nonexistent&%70assword=canarypw" },
  { "upper case key (invalid option)", "host=/nonexistent PASSWORD=canarypw" },
  { "unquoted space (does not parse)", "host=/nonexistent password=canarypw canarytwo" },
  { "bad percent token in a URL (does not parse)", "postgresql://u:canarypw%zz@/x?host=/nonexistent" },
  { "sslpassword", "host=/nonexistent dbname=x sslpassword=canarypw" },
}

local function hidden(text)
  assert.not_matches("canary", text, 1, true)
end

describe("a password in the backend connection string", function()
  local env = jr.test_env("sqlite")

  local function config(url, extra)
    jr.write_file(env.config_file, ("return { backend = %q, scripts = %q, wait_for_db = false%s }\n")
      :format(url, env.dir .. "/scripts", extra or ""))
  end

  for _, s in ipairs(SPELLINGS) do
    it("is masked in errors, logs, check and stats when spelled: " .. s[1], function()
      config(s[2])
      env:script("a", "return function() end")
      for _, cmd in ipairs({ { "push", "a" }, { "stats" }, { "stats", "--json" },
                             { "migrate" }, { "dead", "list" }, { "check" } }) do
        local out, err, code = env:cli(table.unpack(cmd))
        hidden(out)
        hidden(err)
        if cmd[1] ~= "check" then
          assert.is_true(code ~= 0, cmd[1])
          assert.matches("postgres", err:lower(), 1, true)
        end
      end
      -- the same through --backend, which ps would show
      local out, err = env:cli("--backend", s[2], "stats")
      hidden(out)
      hidden(err)
      -- the runner logs it masked and exits 1
      local p = env:start()
      assert.equal(1, env:stop("TERM", p))
      hidden(env:log(p))
      hidden(env:output(p))
    end)
  end

  it("is shown as **** with the rest of the connection string", function()
    config("host=/nonexistent dbname=x password = canarypw")
    local _, err = env:cli("stats")
    assert.matches("password=****", err, 1, true)
    assert.matches("host=/nonexistent", err, 1, true)
  end)

  it("is not echoed when the string does not parse; libpq's reason is", function()
    config("host=/nonexistent PASSWORD=canarypw")
    local _, err = env:cli("stats")
    assert.matches("unparsable connection string", err, 1, true)
    assert.matches('invalid connection option "PASSWORD"', err, 1, true)
    config("host=/nonexistent password=canarypw canarytwo")
    _, err = env:cli("stats")
    assert.matches("unparsable connection string", err, 1, true)
    assert.matches('missing "=" after', err, 1, true)
  end)

  it("given with --backend is gone from the runner's command line", function()
    config("host=/nonexistent dbname=x", ", wait_for_db = true")
    env:script("a", "return function() end")
    local p = env:start(with_args("--backend", "host=/nonexistent dbname=x password=canarypw"),
      { wait = false })
    jr.wait_for(function() return env:log(p):find("wait_for_db", 1, true) end)
    assert.is_true(env:alive(p))
    local cl = cmdline(p.pid)
    assert.matches("--backend", cl, 1, true)
    hidden(cl)
    hidden(env:log(p))
  end)

  it("can come from --backend-file or JOBRUNNER_BACKEND instead of argv", function()
    config("sqlite:" .. env.dir .. "/other.db")
    local file = env.dir .. "/backend.conf"
    jr.write_file(file, "host=/nonexistent dbname=fromfile password=canarypw\n")
    local out, err, code = env:cli("--backend-file", file, "stats")
    assert.equal(1, code)
    assert.matches("dbname=fromfile", err, 1, true)
    hidden(out .. err)
    out, err, code = jr.sh(("cd %s && JOBRUNNER_BACKEND=%s %s -c %s stats"):format(q(env.dir),
      q("host=/nonexistent dbname=fromenv password=canarypw"), q(jr.bin), q(env.config_file)))
    assert.equal(1, code)
    assert.matches("dbname=fromenv", err, 1, true)
    hidden(out .. err)
    -- the command line beats the environment
    out, err, code = jr.sh(("cd %s && JOBRUNNER_BACKEND=%s %s -c %s --backend-file %s stats"):format(
      q(env.dir), q("host=/nonexistent dbname=fromenv"), q(jr.bin), q(env.config_file), q(file)))
    assert.equal(1, code)
    assert.matches("dbname=fromfile", err, 1, true)
    -- a missing file is a usage error naming it
    out, err, code = env:cli("--backend-file", env.dir .. "/nope", "stats")
    assert.equal(2, code)
    assert.matches("nope", err, 1, true)
    -- documented in --help
    out = env:cli("--help")
    assert.matches("--backend-file", out, 1, true)
    assert.matches("JOBRUNNER_BACKEND", out, 1, true)
  end)
end)

-- URLs whose password the masking used to miss: a misspelled scheme, and
-- a '/' or '@' (unencoded) in the password, which libpq splits into the
-- host, port and database. Each is given through every source of the
-- backend URL; expect is what the error or log line must say instead.
local MISSPELT = {
  { "scheme without //", "postgresql:pwuser:canarypw@localhost/postgres",
    "pwuser:****@localhost/postgres", "unknown backend URL" },
  { "// without the scheme's ':'", "postgresql//pwuser:canarypw@localhost/postgres",
    "pwuser:****@localhost/postgres", "unknown backend URL" },
  { "backslashes for //", "postgresql:\\\\pwuser:canarypw@localhost/postgres",
    "pwuser:****@localhost/postgres", "unknown backend URL" },
  { "a '/' in the password", "postgresql://app:canarypw/canarytwo@db.invalid:5432/app",
    "postgresql://app:****@db.invalid:5432/app", "percent-encoded (%2F" },
  { "a '/' after a port-like start", "postgresql://app:5432/canarypw@localhost/app",
    "postgresql://app:****@localhost/app", "percent-encoded (%2F" },
  { "an '@' in the password", "postgresql://app:canarypw@canarytwo@db.invalid/app",
    "postgresql://app:****@db.invalid/app", "percent-encoded (%2F" },
  { "a '?' then a '/' in the password", "postgresql://app:canary?pw/canarytwo@db.invalid/app",
    "postgresql://app:****@db.invalid/app", "percent-encoded (%2F" },
  -- these two parse: the runner waits for the database, showing them masked
  { "a URL as a conninfo's dbname", "host=/nonexistent dbname=postgresql://u:canarypw@x/db",
    "dbname=postgresql://u:****@x/db", "cannot connect" },
  { "a percent-encoded '/' in the password", "postgresql://app:canary%2Fpw@/x?host=/nonexistent",
    "user=app password=**** dbname=x host=/nonexistent", "cannot connect" },
}

describe("a password in a misspelled or ambiguous backend URL", function()
  local env = jr.test_env("sqlite")

  -- jobrunner.lua; with gate, it reads the fifo env.dir/gate first, which
  -- holds the runner after it parsed its arguments
  local function config(backend, json, gate)
    jr.write_file(env.config_file, ("%sreturn { backend = %q, scripts = %q%s }\n"):format(
      gate and ("local f = io.open(%q) f:read('a') f:close()\n"):format(env.dir .. "/gate") or "",
      backend, env.dir .. "/scripts", json and ', log = { format = "json" }' or ""))
  end

  -- How each source gives url: the env prefix, the extra arguments, and the
  -- config's backend.
  local function source(name, url)
    local other = "sqlite:" .. env.dir .. "/other.db"
    if name == "--backend" then return "", { "--backend", url }, other end
    if name == "--backend-file" then
      local file = env.dir .. "/backend.conf"
      jr.write_file(file, url .. "\n")
      return "", { "--backend-file", file }, other
    end
    if name == "JOBRUNNER_BACKEND" then return "JOBRUNNER_BACKEND=" .. q(url) .. " ", {}, other end
    return "", {}, url
  end

  for _, s in ipairs(MISSPELT) do
    for _, from in ipairs({ "--backend", "--backend-file", "JOBRUNNER_BACKEND", "config" }) do
      it(("is masked when spelled with %s, given by %s"):format(s[1], from), function()
        env:script("a", "return function() end")
        for _, json in ipairs({ false, true }) do
          local prefix, args, backend = source(from, s[2])
          -- the CLI
          config(backend, json)
          local cmd = { "cd", q(env.dir), "&&", prefix .. q(jr.bin), "-c", q(env.config_file) }
          for _, a in ipairs(args) do cmd[#cmd + 1] = q(a) end
          local out, err, code = jr.sh(table.concat(cmd, " ") .. " stats")
          assert.is_true(code ~= 0)
          hidden(out)
          hidden(err)
          assert.matches(s[3], err, 1, true)
          assert.matches(s[4], err, 1, true)
          -- the runner, held by its config until its arguments are checked
          os.remove(env.dir .. "/gate")
          assert.is_true(os.execute("mkfifo " .. q(env.dir .. "/gate")))
          config(backend, json, true)
          local p = env:start(prefix .. with_args(table.unpack(args)), { wait = false })
          -- the command line loses the password at once and keeps the rest
          jr.wait_for(function()
            local cl = cmdline(p.pid)
            return cl:find(" run", 1, true) and not cl:find("canary", 1, true)
          end, 5, "the password gone from the command line")
          if from == "--backend" then assert.matches("--backend", cmdline(p.pid), 1, true) end
          jr.write_file(env.dir .. "/gate", "go\n")
          -- refused (exits) or waiting for the database (wait_for_db): kill
          jr.wait_for(function() return env:log(p):find(s[3], 1, true) end, 10, "the error logged")
          hidden(cmdline(p.pid))
          jr.sleep(0.3)
          env:stop("TERM", p)
          local log = env:log(p)
          hidden(log)
          hidden(env:output(p))
          assert.matches(s[4], log, 1, true)
          if json then assert.matches('^{"', log) end
        end
      end)
    end
  end

  it("keeps the spellings that parse: '?' in a password, '@' in a parameter", function()
    config("postgresql://app:canary?pw@/x?host=/nonexistent")
    local out, err = env:cli("stats")
    hidden(out .. err)
    assert.matches("user=app password=**** dbname=x host=/nonexistent", err, 1, true)
    config("postgresql://?host=/nonexistent&user=me@example")
    _, err = env:cli("stats")
    assert.matches("user=me@example host=/nonexistent", err, 1, true)
  end)

  it("names an unknown URI parameter, unless a password could be part of it", function()
    config("postgresql://app:canarypw@/x?host=/nonexistent&bogus=1")
    local out, err, code = env:cli("stats")
    assert.equal(2, code)
    hidden(out .. err)
    assert.matches('invalid URI query parameter: "bogus"', err, 1, true)
    -- an unencoded '&' in a password= value makes a parameter of its tail
    config("postgresql:///x?host=/nonexistent&password=canarypw&canarytwo=1")
    out, err, code = env:cli("stats")
    assert.equal(2, code)
    hidden(out .. err)
    assert.matches('invalid URI query parameter: "****"', err, 1, true)
  end)
end)

if jr.pg_url then
  describe("postgres: a password given on the command line #postgres", function()
    local env = jr.test_env("postgres")

    it("is gone from /proc/PID/cmdline while the runner serves jobs", function()
      -- the test cluster trusts its socket: the password is ignored
      local url = jr.pg_url .. "&password=" .. CANARY
      env:script("a", "return function() end")
      local p = env:start(with_args("--backend", url))
      local id = env:push("a")
      jr.wait_for(function() return env:job(id) == nil end)
      hidden(cmdline(p.pid))
      assert.matches("password=****", cmdline(p.pid), 1, true)
      -- workers never had it
      local kids = jr.sh("pgrep -P " .. p.pid)
      for pid in kids:gmatch("%d+") do hidden(cmdline(pid)) end
      assert.equal(0, env:stop())
      hidden(env:log(p))
    end)
  end)
end

local backend = jr.backends()[1]

describe(backend .. ": a handler's subprocesses", function()
  local env = jr.test_env(backend)

  -- a handler that starts a long sleep in the background, writes its pid
  -- and waits for it
  local SLEEPER = [[
    return { timeout = %s, handle = function(job)
      os.execute("sleep 300 & echo $! > " .. os.getenv("PWD") .. "/child.pid; wait")
    end }]]

  local function child_pid()
    return jr.wait_for(function()
      local s = jr.read_file(env.dir .. "/child.pid")
      return s and tonumber(s:match("%d+"))
    end, 20, "child pid")
  end

  local function gone(pid)
    jr.wait_for(function() return not pid_alive(pid) end, 20,
      "subprocess " .. pid .. " gone")
  end

  it("die when their worker is killed for its timeout", function()
    env:config("concurrency = 1")
    env:script("sleeper", SLEEPER:format("1"))
    env:start()
    local id = env:push("sleeper", nil, "--max-retries", "0")
    local pid = child_pid()
    assert.is_true(pid_alive(pid))
    env:wait_state(id, "dead", 30)
    gone(pid)
    assert.is_true(env:alive())
  end)

  it("die when the runner shuts down", function()
    env:config("concurrency = 1, shutdown_timeout = 1")
    env:script("sleeper", SLEEPER:format("600"))
    env:start()
    env:push("sleeper")
    local pid = child_pid()
    assert.equal(0, env:stop("TERM"))
    gone(pid)
  end)

  it("die when the runner is killed with SIGKILL", function()
    env:config("concurrency = 1")
    env:script("sleeper", SLEEPER:format("600"))
    env:start()
    env:push("sleeper")
    local pid = child_pid()
    env:stop("KILL")
    gone(pid)
  end)
end)

describe(backend .. ": handler output", function()
  local env, holder
  before_each(function() env = jr.env(backend) end)
  after_each(function()
    if holder then os.execute("kill " .. holder .. " 2>/dev/null") end
    holder = nil
    env:cleanup()
  end)

  local PRINTER = [[
    return { timeout = 5, handle = function(job)
      local line = string.rep("y", 999)
      for i = 1, 1024 do print(line) end
      io.stderr:write(("z"):rep(100000), "\n")
    end }]]

  -- The runner's stdout and stderr are a pipe that a process holds open
  -- and never reads.
  local function start_blocked()
    local fifo = env.dir .. "/fifo"
    os.execute("mkfifo " .. q(fifo))
    os.execute(("sh -c 'echo $$ > %s/holder.pid; exec sleep 600' < %s >/dev/null 2>&1 &")
      :format(q(env.dir), q(fifo)))
    local p = env:start("sh -c " .. q('exec "$0" "$@" >' .. q(fifo)), { wait = false })
    holder = jr.wait_for(function()
      local s = jr.read_file(env.dir .. "/holder.pid")
      return s and tonumber(s:match("%d+"))
    end, 5, "holder pid")
    return p
  end

  it("never blocks a job, even when nobody reads the runner's stdout", function()
    env:config("concurrency = 2")
    env:script("printer", PRINTER)
    local ids = {}
    for i = 1, 4 do ids[i] = env:push("printer", nil, "--max-retries", "0") end
    start_blocked()
    for _, id in ipairs(ids) do
      jr.wait_for(function() return env:job(id) == nil end, 30, "job " .. id .. " done")
    end
    assert.equal(0, env:stop())
  end)

  it("goes to the log by default, with the job id, capped per job", function()
    env:script("hello", [[
      return function(job)
        print("hello from the handler")
        io.write("no newline at the end")
      end]])
    env:script("printer", PRINTER)
    env:start()
    local id = env:push("hello")
    jr.wait_for(function() return env:job(id) == nil end)
    local big = env:push("printer")
    jr.wait_for(function() return env:job(big) == nil end)
    assert.equal(0, env:stop())
    local log = env:log()
    assert.matches(("job %d (hello) output: hello from the handler"):format(id), log, 1, true)
    assert.matches(("job %d (hello) output: no newline at the end"):format(id), log, 1, true)
    assert.matches(("job %d (printer) output: yyy"):format(big), log, 1, true)
    assert.matches(("job %d (printer): output over"):format(big), log, 1, true)
    assert.is_true(#log < 300000, "log of " .. #log .. " bytes")
    assert.equal("", env:output())
  end)

  it("goes to the runner's own stdout and stderr with handler_output = \"inherit\"", function()
    env:config('handler_output = "inherit"')
    env:script("hello", 'return function(job) print("inherited " .. job.id) end')
    env:start()
    local id = env:push("hello")
    jr.wait_for(function() return env:job(id) == nil end)
    assert.equal(0, env:stop())
    assert.matches("inherited " .. id, env:output(), 1, true)
  end)

  it("is appended to a file given as handler_output", function()
    local file = env.dir .. "/handlers.out"
    jr.write_file(file, "before\n")
    env:config(("handler_output = %q"):format(file))
    env:script("hello", 'return function(job) print("to the file " .. job.id) end')
    env:start()
    local id = env:push("hello")
    jr.wait_for(function() return env:job(id) == nil end)
    assert.equal(0, env:stop())
    local text = jr.read_file(file)
    assert.matches("^before\n", text)
    assert.matches("to the file " .. id, text, 1, true)
    assert.not_matches("to the file", env:log(), 1, true)
  end)

  it("refuses a file it cannot open, naming the key", function()
    env:config('handler_output = "/nonexistent/dir/out.log"')
    env:script("hello", "return function() end")
    local p = env:start()
    assert.equal(1, env:stop("TERM", p))
    assert.matches("handler_output", env:log(p), 1, true)
    assert.matches("/nonexistent/dir/out.log", env:log(p), 1, true)
  end)
end)

for _, b in ipairs(jr.backends()) do describe(b .. ": worker start-up", function()
  local env
  local backend = b
  before_each(function() env = jr.env(backend) end)
  after_each(function() env:cleanup() end)

  it("works when the runner starts with stdin closed and fd 3 free", function()
    env:script("a", "return function() end")
    local p = env:start("sh -c " .. q('exec "$0" "$@" <&- 3>&-'))
    local id = env:push("a")
    jr.wait_for(function() return env:job(id) == nil end, 20, "job done")
    assert.equal(0, env:stop("TERM", p))
  end)

  it("works when the runner starts with stdin, stdout and stderr closed", function()
    env:script("a", "return function() end")
    local p = env:start("sh -c " .. q('exec "$0" "$@" <&- >&- 2>&- 3>&-'), { wait = false })
    local id = env:push("a")
    jr.wait_for(function() return env:job(id) == nil end, 20, "job done")
    assert.equal(0, env:stop("TERM", p))
    -- nothing was written into the database file by a log line
    local out, _, code = jr.sh("sqlite3 " .. q(env:sqlite_path()) .. " 'PRAGMA integrity_check'")
    if backend == "sqlite" then
      assert.equal(0, code)
      assert.matches("ok", out, 1, true)
    end
  end)
end) end
