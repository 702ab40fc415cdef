-- red_heldlines_spec.lua - a plain handler's lines made late and held in
-- the worker (docs/handlers.md, "Each attempt's logs") and jobrunner.sql
-- run after the completion's writes, against hostile and careless
-- handlers, on each backend: fields whose metatables or later changes
-- misbehave fail only their job, with its id; a flood of lines keeps the
-- cap and the tail; a failed statement keeps the lines of the attempt it
-- failed; a worker killed around a held success loses no job; a stop
-- waits for the lines a wait kept, and records that success; a
-- statement reading its own job's row finds it gone on both engines.
local jr = require "jr"
local cjson = require "cjson"

-- A table of the handlers' own, in the schema their statements reach:
-- its name as a statement names it.
local function app_table(env, backend, name, pg_cols, sqlite_cols)
  if backend == "postgres" then
    jr.psql("CREATE SCHEMA IF NOT EXISTS " .. env.schema)
    jr.psql(("CREATE TABLE %s.%s (%s)"):format(env.schema, name, pg_cols))
    return env.schema .. "." .. name
  end
  env:exec(("CREATE TABLE %s (%s)"):format(name, sqlite_cols))
  return name
end

local function ended(env, id)
  return jr.wait_for(function()
    local r = env:job(id)
    return r and (r.state == "completed" or r.state == "dead") and r
  end, 60, ("job %d ended"):format(id))
end

local function runs(env, id)
  local out, err, code = env:cli("show", tostring(id), "--logs", "--json")
  assert.equal(0, code, err)
  return cjson.decode(out)
end

local function all_msgs(run)
  local t = {}
  for _, l in ipairs(run.lines) do t[#t + 1] = l.level .. " " .. l.msg end
  return table.concat(t, "\n")
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": held and late lines, red team", function()
    local env = jr.test_env(backend)

    it("confines a fields table that misbehaves after the call to its job, naming it", function()
      env:config('retention = { completed = "1h" }, defaults = { max_retries = 0 }, log = { echo = false }')
      env:script("bad", [[
local jobrunner = require "jobrunner"
return function(job)
  local k = job.payload.k
  if k == "pairs" then
    jobrunner.log("info", "m", setmetatable({a = 1}, {__pairs = function() error("pairs boom") end}))
  elseif k == "index" then
    jobrunner.log("info", "m", setmetatable({a = 1}, {__index = function() error("index boom") end}))
  elseif k == "yield" then
    jobrunner.log("info", "m", setmetatable({a = 1}, {__pairs = function() coroutine.yield() end}))
  elseif k == "nested" then
    local f = {a = 1}
    jobrunner.log("info", "m", f)
    f.a = {deep = true}
  elseif k == "cycle" then
    local f = {a = 1}
    jobrunner.log("info", "m", f)
    f.self = f
  elseif k == "func" then
    local f = {a = 1}
    jobrunner.log("info", "m", f)
    f.a = print
  elseif k == "huge" then
    local f = {a = 1}
    jobrunner.log("info", "m", f)
    for i = 1, 100000 do f["k" .. i] = i end
  elseif k == "error" then
    jobrunner.log("info", "before the error", {n = 1})
    error("handler boom")
  elseif k == "good_then_nested" then
    jobrunner.log("info", "good line")
    print("printed")
    local f = {a = 1}
    jobrunner.log("info", "m", f)
    f.a = {}
  elseif k == "nested_print" then
    local f = {a = 1}
    jobrunner.log("info", "m", f)
    f.a = {}
    print("flushes")
  elseif k == "nested_error" then
    local f = {a = 1}
    jobrunner.log("info", "m", f)
    f.a = {}
    error("handler boom")
  elseif k == "level" then
    jobrunner.log("warning", "m")
  elseif k == "bytes" then
    jobrunner.log("info", "a\0b\1c\255d", {["x\255"] = "v\0w"})
  end
  return true
end]])
      env:start()
      local ids = {}
      for _, k in ipairs({"pairs", "index", "yield", "nested", "cycle", "func", "huge",
                          "error", "nested_error", "good_then_nested", "nested_print", "level", "bytes"}) do
        ids[k] = env:push("bad", ('{"k": "%s"}'):format(k))
      end
      local function st(k)
        local r = ended(env, ids[k])
        return r.state, type(r.last_error) == "string" and r.last_error or ""
      end
      -- metamethods are not consulted: the raw table is the line
      for _, k in ipairs({"pairs", "index", "yield"}) do
        local state, e = st(k)
        assert.equal("completed", state, k .. ": " .. e)
        assert.equal("m a=1", runs(env, ids[k])[1].lines[1].msg)
      end
      -- a table made bad after the call fails its attempt, naming the line
      for k, field in pairs({nested = "a", cycle = "self", func = "a",
                             good_then_nested = "a", nested_print = "a"}) do
        local state, e = st(k)
        assert.equal("dead", state, k)
        assert.truthy(e:find("field '" .. field .. "' must be", 1, true), k .. ": " .. e)
        assert.truthy(e:find("of the line 'm', its fields read after the call", 1, true), k .. ": " .. e)
      end
      local state, e = st("huge")
      assert.equal("dead", state)
      assert.truthy(e:find("more than 64 fields (of the line 'm'", 1, true), e)
      -- the lines made before the bad one are kept with the attempt
      assert.equal("info good line\nstdout printed", all_msgs(runs(env, ids.good_then_nested)[1]))
      -- the handler's own error wins, its earlier lines kept
      state, e = st("error")
      assert.equal("dead", state)
      assert.truthy(e:find("bad.lua:%d+: handler boom"), e)
      assert.equal("info before the error n=1", all_msgs(runs(env, ids.error)[1]))
      state, e = st("nested_error")
      assert.truthy(e:find("bad.lua:%d+: handler boom"), e)
      state, e = st("level")
      assert.equal("dead", state)
      assert.truthy(e:find("bad.lua:%d+: bad argument #1 to 'log' %(invalid option 'warning'%)"), e)
      state, e = st("bytes")
      assert.equal("completed", state, e)
      assert.equal("a\239\191\189b\1c\239\191\189d x\239\191\189=\"v\239\191\189w\"",
                   runs(env, ids.bytes)[1].lines[1].msg)
      assert.is_nil(env:log():find("died", 1, true), env:log())
      assert.equal(0, env:stop())
    end)

    it("keeps the cap, the count of the dropped and the tail of 100,000 lines", function()
      env:config('retention = { completed = "1h" }, defaults = { max_retries = 0 }, log = { echo = false }')
      env:script("flood", [[
local log = require("jobrunner").log
return function(job)
  for i = 1, 100000 do log("info", "line", {i = i}) end
  return true
end]])
      env:start()
      local id = env:push("flood", "{}")
      local r = ended(env, id)
      assert.equal("completed", r.state, r.last_error)
      local rr = runs(env, id)
      assert.equal(1, #rr)
      local lines = rr[1].lines
      assert.equal("line i=100000", lines[#lines].msg)
      assert.equal(100000, #lines + rr[1].dropped_lines)
      assert.equal("line i=" .. (100000 - #lines + 1), lines[1].msg)
      assert.is_true(#cjson.encode(lines) <= 65536 + 64, #cjson.encode(lines))
      assert.equal(0, env:stop())
    end)

    it("keeps each attempt's lines under its attempt, and a failed statement's attempt keeps its lines", function()
      local t = app_table(env, backend, "t", "k text PRIMARY KEY",
                          "k TEXT PRIMARY KEY")
      env:config('defaults = { max_retries = 1, backoff = 0 }, log = { echo = false }, concurrency = 2')
      env:script("retry", ([[
local jobrunner = require "jobrunner"
return function(job)
  jobrunner.log("info", "try", {attempt = job.attempt, id = job.id})
  if job.payload.sql then
    jobrunner.sql("INSERT INTO %s (k) VALUES ('dup')")
  elseif job.attempt == 1 then
    error("first fails")
  end
end]]):format(t))
      env:exec(("INSERT INTO %s (k) VALUES ('dup')"):format(t))
      env:start()
      local a = env:push("retry", "{}", "--result-ttl", "1h")
      local b = env:push("retry", '{"sql": true}')
      local c = env:push("retry", "{}")
      for _ = 1, 4 do env:push("retry", "{}") end
      local ra = ended(env, a)
      local rb = ended(env, b)
      assert.equal("completed", ra.state)
      assert.equal("dead", rb.state)
      local la = runs(env, a)
      assert.equal(2, #la, cjson.encode(la))
      assert.truthy(all_msgs(la[1]):find("try attempt=1", 1, true), cjson.encode(la))
      assert.truthy(all_msgs(la[2]):find("try attempt=2", 1, true), cjson.encode(la))
      local lb = runs(env, b)
      assert.equal(2, #lb, cjson.encode(lb))
      assert.truthy(all_msgs(lb[1]):find("try attempt=1", 1, true), cjson.encode(lb))
      assert.truthy(all_msgs(lb[2]):find("try attempt=2", 1, true), cjson.encode(lb))
      jr.wait_for(function() return tonumber(env:count()) == 2 end, 60, "the others deleted")
      assert.is_nil(env:job(c))
      assert.equal(0, env:stop())
    end)

    it("loses no job when a worker holding a success's lines is killed", function()
      env:config('defaults = { max_retries = 3, backoff = 0 }, log = { echo = false }, concurrency = 1')
      env:script("die", [[
local jobrunner = require "jobrunner"
return function(job)
  local pid = io.open("/proc/self/stat"):read("l"):match("^(%d+)")
  jobrunner.log("info", "held", {id = job.id})
  if job.payload.kill and job.attempt == 1 then
    os.execute("(sleep 0.05; kill -9 " .. pid .. ") >/dev/null 2>&1 &")
  end
  local f = io.open(job.payload.mark .. job.id .. "." .. job.attempt, "w"); f:close()
end]])
      env:start()
      local mark = env.dir .. "/mark"
      local a = env:push("die", ('{"kill": true, "mark": "%s"}'):format(mark))
      local b = env:push("die", ('{"mark": "%s"}'):format(mark))
      jr.wait_for(function() return env:job(a) == nil and env:job(b) == nil end, 60, "both done")
      -- each ran to its end at least once; the runner goes on
      local ls = jr.sh("ls " .. env.dir)
      assert.truthy(ls:find("mark" .. a .. "%.%d"), ls)
      assert.truthy(ls:find("mark" .. b .. "%.%d"), ls)
      local c = env:push("die", ('{"mark": "%s"}'):format(mark))
      jr.wait_for(function() return env:job(c) == nil end, 60, "c done")
      assert.equal(0, env:stop())
    end)

    it("lets a statement that reads its own job's row see what each engine documents", function()
      local t = app_table(env, backend, "seen", "job bigint, n bigint",
                          "job INTEGER, n INTEGER")
      local jobs = backend == "postgres" and env.schema .. ".jobs" or "jobs"
      env:script("own", ([[
local jobrunner = require "jobrunner"
return function(job)
  jobrunner.sql("INSERT INTO %s (job, n) SELECT $1, count(*) FROM %s WHERE id = $1", job.id)
end]]):format(t, jobs))
      env:start()
      local a = env:push("own", "{}")
      jr.wait_for(function() return env:job(a) == nil end, 60, "a done")
      local rows = env:query("SELECT n FROM " .. t)
      -- both engines alike: the deleted success's row is gone when they run
      assert.equal(1, #rows)
      assert.equal(0, tonumber(rows[1].n))
      assert.equal(0, env:stop())
    end)

    it("answers a wait on a held success while the worker runs its next job", function()
      env:config('concurrency = 1, log = { echo = false }')
      env:script("shared", [[
local jobrunner = require "jobrunner"
local F = {}        -- careless: one fields table for every line
return function(job)
  F.user = job.payload.user .. "-start"
  while not io.open(job.payload.go) do os.execute("sleep 0.05") end
  jobrunner.log("info", "hi", F)
  F.user = job.payload.user .. "-end"
end]])
      local go1, go2 = env.dir .. "/go1", env.dir .. "/go2"
      local a = env:push("shared", ('{"go": "%s", "user": "a"}'):format(go1))
      local b = env:push("shared", ('{"go": "%s", "user": "b"}'):format(go2))
      env:start()
      env:wait_state(a, "running", 30)
      local read = jr.wait_bg(env, tostring(a), "--timeout", "120")
      jr.wait_for(function()
        local rows = env:query(("SELECT count(*) AS n FROM jobs WHERE id = %d" ..
          " AND result_ttl IS NOT NULL"):format(a))
        return tonumber(rows[1].n) == 1
      end, 30, "the wait's mark")
      assert.is_nil(io.open(go2))
      assert(io.open(go1, "w")):close()
      env:wait_state(b, "running", 30)
      local row = jr.wait_for(function()
        local r = env:job(a)
        return r and r.state == "completed" and r
      end, 20, "a completed while b runs")
      assert(io.open(go2, "w")):close()
      local out, err, code = read()
      assert.equal(0, code, out .. err)
      local lines = runs(env, a)
      assert.equal("hi user=a-end", lines[1].lines[1].msg)
      assert.is_truthy(row)
      assert.equal(0, env:stop())
    end)

    it("keeps and shows the lines of a success whose wait began as it ended, across a reload", function()
      env:config('concurrency = 1, log = { echo = false }')
      env:script("edge", [[
local jobrunner = require "jobrunner"
return function(job)
  jobrunner.log("info", "edge", {n = job.payload.n})
  while not io.open(job.payload.go) do os.execute("sleep 0.01") end
  jobrunner.log("info", "edge end", {n = job.payload.n})
end]])
      local p = env:start()
      for n = 1, 4 do
        local go = env.dir .. "/go" .. n
        local id = env:push("edge", ('{"go": "%s", "n": %d}'):format(go, n))
        env:wait_state(id, "running", 30)
        if n == 3 then env:signal("HUP", p) end
        assert(io.open(go, "w")):close()
        local read = jr.wait_bg(env, tostring(id), "--timeout", "60")
        local out, err, code = read()
        if code == 0 then
          assert.truthy(out:find(id .. " completed", 1, true), out)
          local r = runs(env, id)
          assert.equal(("info edge n=%d\ninfo edge end n=%d"):format(n, n), all_msgs(r[1]))
        else
          assert.equal(6, code, out .. err)           -- gone: its end came first
          assert.truthy(out:find(id .. " gone", 1, true), out)
        end
      end
      assert.equal(0, env:stop())
      assert.is_nil(env:log():find("not recorded", 1, true))
    end)

    it("deletes a held success across a reload, and stops with a wait on held lines", function()
      env:config('concurrency = 1, shutdown_timeout = 30, log = { echo = false }')
      env:script("slow", [[
local jobrunner = require "jobrunner"
return function(job)
  jobrunner.log("info", "slow", {n = job.payload.n})
  while not io.open(job.payload.go) do os.execute("sleep 0.02") end
end]])
      local p = env:start()
      local go1, go2 = env.dir .. "/go1", env.dir .. "/go2"
      local a = env:push("slow", ('{"go": "%s", "n": 1}'):format(go1))
      env:wait_state(a, "running", 30)
      -- a reload's retention does not apply (settings are read at start):
      -- the success held by the old generation's worker is deleted
      env:config('concurrency = 1, shutdown_timeout = 30, log = { echo = false }, ' ..
                 'retention = { completed = "1h" }')
      env:signal("HUP", p)
      jr.wait_for(function() return env:log(p):find("reload[:e][d ]") end, 30, "reload done")
      assert(io.open(go1, "w")):close()
      jr.wait_for(function() return env:job(a) == nil end, 30, "a deleted")
      -- a wait on b; b ends while c runs; a stop then
      local b = env:push("slow", ('{"go": "%s", "n": 2}'):format(go2))
      local c = env:push("slow", ('{"go": "%s", "n": 3}'):format(go2))
      env:wait_state(b, "running", 30)
      local read = jr.wait_bg(env, tostring(b), "--timeout", "60")
      jr.wait_for(function()
        local rows = env:query(("SELECT count(*) AS n FROM jobs WHERE id = %d" ..
          " AND result_ttl IS NOT NULL"):format(b))
        return tonumber(rows[1].n) == 1
      end, 30, "the wait's mark")
      assert(io.open(go2, "w")):close()
      assert.equal(0, env:stop(nil, p, 60))        -- one SIGTERM: a drain
      local out, err, code = read()
      assert.equal(0, code, out .. err .. env:log(p))
      assert.truthy(out:find(b .. " completed", 1, true), out)
      local rc = env:job(c)                          -- c ran to its end or waits
      assert.is_truthy(rc == nil or rc.state == "queued", c)
      assert.equal(1, #runs(env, b), env:log(p))
      assert.equal("info slow n=2", all_msgs(runs(env, b)[1]))
    end)

    it("waits at a stop for a held success not yet recorded, and stores its lines", function()
      env:config('concurrency = 1, shutdown_timeout = 60, log = { echo = false }')
      env:script("slow", [[
local jobrunner = require "jobrunner"
return function(job)
  jobrunner.log("info", "slow", {n = job.payload.n})
  while not io.open(job.payload.go) do os.execute("sleep 0.02") end
  local e = io.open(job.payload.go .. ".ended", "w"); e:write("x"); e:close()
end]])
      local p = env:start()
      local go = env.dir .. "/go"
      local b = env:push("slow", ('{"go": "%s", "n": 2}'):format(go))
      env:wait_state(b, "running", 30)
      local read = jr.wait_bg(env, tostring(b), "--timeout", "60")
      jr.wait_for(function()
        local rows = env:query(("SELECT count(*) AS n FROM jobs WHERE id = %d" ..
          " AND result_ttl IS NOT NULL"):format(b))
        return tonumber(rows[1].n) == 1
      end, 30, "the wait's mark")
      -- another session holds the write lock: b's success cannot be recorded
      local rel, locked = env.dir .. "/release", env.dir .. "/locked"
      local hold = ("\\! echo x > %s\n\\! while [ ! -e %s ]; do sleep 0.05; done\nCOMMIT;\n"):format(locked, rel)
      local cmd
      if backend == "postgres" then
        hold = ("BEGIN;\nLOCK TABLE %s.jobs IN EXCLUSIVE MODE;\n"):format(env.schema) .. hold
        cmd = ("psql -q %s"):format(jr.quote(jr.pg_url))
      else
        hold = "BEGIN IMMEDIATE;\n" .. hold:gsub("\\!", ".shell")
        cmd = "sqlite3 " .. jr.quote(env:sqlite_path())
      end
      local f = io.open(env.dir .. "/hold.sql", "w"); f:write(hold); f:close()
      os.execute(("%s < %s >%s/hold.out 2>&1 &"):format(cmd, jr.quote(env.dir .. "/hold.sql"), env.dir))
      jr.wait_file(locked, 30)
      assert(io.open(go, "w")):close()
      jr.wait_file(go .. ".ended", 30)
      env:signal("TERM", p)
      jr.wait_for(function() return env:log(p):find("shutting down", 1, true) end, 30, "the stop")
      assert(io.open(rel, "w")):close()
      jr.wait_for(function() return not env:alive(p) end, 90, "runner exit")
      local out, err, code = read()
      assert.equal(0, code, out .. err .. env:log(p))
      assert.truthy(out:find(b .. " completed", 1, true), out)
      assert.equal("info slow n=2", all_msgs(runs(env, b)[1]))
    end)
  end)
end
