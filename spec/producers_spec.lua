-- producers_spec.lua - SQLite under pressure: eight producer processes
-- pushing while the runner drains, a read-only database and a database
-- directory deleted under a running runner. SQLite only (tagged sqlite).
--
-- The runner runs as root in CI and root ignores file modes, so the
-- read-only and deleted-directory cases run the runner as user nobody
-- (setpriv, which execs in place so the pid is the runner's) in a temp
-- directory owned by nobody. A running runner keeps its database
-- descriptors open, so making the file read-only under it changes nothing
-- it can see; the read-only case is therefore a database that is read-only
-- when the runner starts, then made writable again.
local jr = require "jr"

local q = jr.quote
local PRODUCERS, EACH = 8, 100   -- a push is a process start (~50 ms)

-- The ledger handler: appends "<tag> <id>" to dir/ledger, one write each;
-- the tag is the payload's t, else "run".
local function ledger_script(env)
  env:script("led", ([[
local ledger = %q
return function(job)
  local f = assert(io.open(ledger, "a"))
  f:write(job.payload.t or "run", " ", job.id, "\n")
  f:close()
end
]]):format(env.dir .. "/ledger"))
end

local function ledger(env)
  local runs = {}
  local text = jr.read_file(env.dir .. "/ledger") or ""
  for tag, id in text:gmatch("(%S+) (%d+)\n") do
    local k = tag .. " " .. id
    runs[k] = (runs[k] or 0) + 1
  end
  return runs
end

-- CPU seconds (user + system) the process has used.
local function cpu(pid)
  local stat = assert(jr.read_file("/proc/" .. pid .. "/stat"), "no process " .. pid)
  local fields = {}
  for f in stat:gsub("^%d+ %b() ", ""):gmatch("%S+") do fields[#fields + 1] = f end
  -- fields[1] is field 3 (state): utime and stime are fields 14 and 15
  local hz = tonumber(jr.sh("getconf CLK_TCK"):match("%d+")) or 100
  return (tonumber(fields[12]) + tonumber(fields[13])) / hz
end

local function busy_error(text)
  return text:match("[^\n]*database is locked[^\n]*") or
         text:match("[^\n]*SQLITE_BUSY[^\n]*") or
         text:match("[^\n]*database is busy[^\n]*")
end

local on_sqlite = false
for _, b in ipairs(jr.backends()) do on_sqlite = on_sqlite or b == "sqlite" end
if not on_sqlite then return end

describe("sqlite: producers #sqlite", function()
  local env = jr.test_env("sqlite", { config = "concurrency = 2" })

  it("8 producers pushing while the runner drains: no busy error, each job once", function()
    ledger_script(env)
    env:cli("migrate")
    env:start()
    local cmd = ("cd %s && %s -c %s push led"):format(q(env.dir), q(jr.bin),
      q(env.config_file))
    for p = 1, PRODUCERS do
      local base = ("%s/producer%d"):format(env.dir, p)
      local loop = ("i=0; while [ $i -lt %d ]; do i=$((i+1)); %s '{\"p\":%d}' " ..
        ">>%s 2>>%s || echo \"push $i: exit $?\" >>%s; done; echo done >%s")
        :format(EACH, cmd, p, q(base .. ".out"), q(base .. ".err"),
          q(base .. ".err"), q(base .. ".done"))
      os.execute(("sh -c %s >/dev/null 2>&1 &"):format(q(loop)))
    end
    jr.wait_for(function()
      for p = 1, PRODUCERS do
        if not jr.read_file(("%s/producer%d.done"):format(env.dir, p)) then
          return false
        end
      end
      return true
    end, 300, "producers done")
    local ids = {}
    for p = 1, PRODUCERS do
      local base = ("%s/producer%d"):format(env.dir, p)
      local err = jr.read_file(base .. ".err") or ""
      assert.are.equal("", err, "producer " .. p .. " stderr")
      for id in (jr.read_file(base .. ".out") or ""):gmatch("%d+") do
        ids[#ids + 1] = id
      end
    end
    assert.are.equal(PRODUCERS * EACH, #ids)
    jr.wait_for(function() return env:count() == 0 end, 120, "drain")
    local runs = ledger(env)
    local seen, twice, never = {}, {}, {}
    for _, id in ipairs(ids) do
      assert.is_nil(seen[id], "id " .. id .. " printed by two pushes")
      seen[id] = true
      local n = runs["run " .. id] or 0
      if n == 0 then never[#never + 1] = id elseif n > 1 then twice[#twice + 1] = id end
    end
    assert.are.same({}, never)
    assert.are.same({}, twice)
    local n = 0
    for _ in pairs(runs) do n = n + 1 end
    assert.are.equal(PRODUCERS * EACH, n)
    assert.is_nil(busy_error(env:log()))
    assert.are.equal(0, env:stop())
    assert.is_nil(busy_error(env:log()))
  end)
end)

describe("sqlite: database trouble #sqlite", function()
  local env, dbdir
  local as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups"

  local function chown(path)
    assert(os.execute("chown -R nobody:nogroup " .. q(path)))
  end

  before_each(function()
    env = jr.env("sqlite")
    dbdir = env.dir .. "/db"
    -- the database in its own directory, so it can be deleted whole
    env.url = "sqlite:" .. dbdir .. "/jobs.db"
    env:config("concurrency = 1, lease = 2")
    os.execute("mkdir -p " .. q(dbdir))
    os.execute("chmod 755 " .. q(env.dir))
    ledger_script(env)
  end)
  after_each(function() env:cleanup() end)

  -- Rows in the database (jr's env:count reads dir/jobs.db, not db/).
  local function count()
    local out, err, code = jr.sh(("sqlite3 %s 'SELECT count(*) FROM jobs'"):format(
      q(dbdir .. "/jobs.db")))
    assert(code == 0, "count failed: " .. err)
    return tonumber(out:match("%d+"))
  end

  -- The runner as nobody, not waiting for its handlers to load (it may be
  -- waiting for the database).
  local function start()
    return env:start(as_nobody, { wait = false })
  end

  local function push_as_nobody(tag)
    local out, err, code = jr.sh(("cd %s && %s %s -c %s push led %s"):format(q(env.dir),
      as_nobody, q(jr.bin), q(env.config_file), q(('{"t":"%s"}'):format(tag))))
    assert(code == 0, "push failed: " .. err)
    return assert(tonumber(out:match("%d+")))
  end

  -- Asserts the runner is alive and used little CPU over a few seconds:
  -- it waits for the database, it does not spin on it.
  local function assert_idle(p)
    local before = cpu(p.pid)
    jr.sleep(3)
    assert.is_true(env:alive(p), "runner exited:\n" .. env:log(p))
    local used = cpu(p.pid) - before
    assert.is_true(used < 0.5, ("runner used %.2fs of CPU in 3s"):format(used))
  end

  it("read-only at start: waits with a clear error, then runs the jobs", function()
    chown(env.dir)
    local a = push_as_nobody("old")
    local b = push_as_nobody("old")
    assert(os.execute("chmod 0400 " .. q(dbdir .. "/jobs.db")))
    -- as nobody, the file really is read-only
    local _, err, code = jr.sh(("cd %s && %s %s -c %s push led"):format(q(env.dir),
      as_nobody, q(jr.bin), q(env.config_file)))
    assert.are_not.equal(0, code)
    assert.is_truthy(err:find("jobs.db", 1, true), err)
    local p = start()
    jr.wait_for(function()
      return env:log(p):find("jobs.db", 1, true) and
        env:log(p):lower():find("[^\n]*error[^\n]*")
    end, 20, "an error naming the database")
    local line = env:log(p):match("[^\n]*error[^\n]*")
    assert.is_truthy(line:find(dbdir .. "/jobs.db", 1, true), line)
    assert.is_truthy(line:lower():find("permission denied") or
      line:lower():find("read%-only") or line:lower():find("readonly"), line)
    assert_idle(p)
    assert(os.execute("chmod 0600 " .. q(dbdir .. "/jobs.db")))
    jr.wait_for(function()
      local runs = ledger(env)
      return runs["old " .. a] and runs["old " .. b]
    end, 60, "jobs run once the database is writable")
    jr.wait_for(function() return count() == 0 end, 20, "jobs deleted")
    local runs = ledger(env)
    assert.are.equal(1, runs["old " .. a])
    assert.are.equal(1, runs["old " .. b])
    assert.are.equal(0, env:stop("TERM", p))
  end)

  it("database directory deleted under it: clear error, no spin, recovers", function()
    chown(env.dir)
    local a = push_as_nobody("old")
    local p = start()
    jr.wait_for(function() return ledger(env)["old " .. a] end, 20, "first job")
    jr.wait_for(function() return count() == 0 end, 20, "first job deleted")
    assert(os.execute("rm -rf " .. q(dbdir)))
    -- the runner notices at its next write; a wake-up poll gets there
    jr.wait_for(function()
      local line = env:log(p):match("[^\n]*error[^\n]*")
      return line and line:find(dbdir .. "/jobs.db", 1, true)
    end, 30, "an error naming the deleted database")
    local line = env:log(p):match("[^\n]*error[^\n]*")
    assert.is_truthy(line:lower():find("gone") or line:lower():find("deleted") or
      line:lower():find("no such file"), line)
    assert_idle(p)
    -- fixed: the directory is back and a producer creates a new database
    os.execute("mkdir -p " .. q(dbdir))
    chown(dbdir)
    local b = push_as_nobody("new")
    jr.wait_for(function() return ledger(env)["new " .. b] end, 60,
      "a job of the new database runs")
    assert.is_true(env:alive(p))
    assert.are.equal(0, env:stop("TERM", p))
  end)
end)
