-- results_spec.lua - a handler's return value is its job's result (JSON,
-- max_result, kept for result_ttl then pruned), seen through show --json,
-- the Lua client and SQL; `jobrunner wait` and client:wait for completed,
-- dead, cancelled and timeout, with their exit statuses.
local jr = require "jr"
local cjson = require "cjson"

local RETURNS = [[
  local jobrunner = require "jobrunner"
  return { max_retries = 0, handle = function(job)
    local k = job.payload.k
    if k == "table" then return { a = 1, b = { "x", 2.5 }, c = { d = true } } end
    if k == "string" then return "héllo" end
    if k == "number" then return 42 end
    if k == "float" then return 0.5 end
    if k == "boolean" then return false end
    if k == "null" then return jobrunner.null end
    if k == "big" then return string.rep("x", 70000) end
    if k == "function" then return print end
    if k == "nul" then return "a\0b" end
  end }]]

local function show(env, id)
  local out, err, code = env:cli("show", tostring(id), "--json")
  assert(code == 0, err)
  return cjson.decode(out)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " results:", function()
    local env = jr.test_env(backend)

    it("round-trips tables, strings, numbers and booleans; nothing is null", function()
      env:script("r", RETURNS)
      local ids = {}
      for _, k in ipairs({ "table", "string", "number", "float", "boolean", "null", "none" }) do
        ids[k] = env:push("r", cjson.encode({ k = k }))
      end
      env:start()
      local out, err, code = env:cli("wait", tostring(ids.table), tostring(ids.string),
        tostring(ids.number), tostring(ids.float), tostring(ids.boolean), tostring(ids.null),
        "--json", "--timeout", "30")
      assert.equal(0, code, err)
      local lines = {}
      for l in out:gmatch("[^\n]+") do lines[#lines + 1] = cjson.decode(l) end
      assert.equal(6, #lines)
      assert.same({ a = 1, b = { "x", 2.5 }, c = { d = true } }, lines[1].result)
      assert.equal("héllo", lines[2].result)
      assert.equal(42, lines[3].result)
      assert.equal(0.5, lines[4].result)
      assert.equal(false, lines[5].result)
      assert.equal(cjson.null, lines[6].result)
      for _, l in ipairs(lines) do assert.equal("completed", l.state) end
      -- show --json carries the same value; kept for result_ttl (1h)
      local t = show(env, ids.table)
      assert.same({ a = 1, b = { "x", 2.5 }, c = { d = true } }, t.result)
      assert.equal("completed", t.state)
      assert.is_string(t.keep_until)
      -- nothing returned: a plain success, deleted before anyone waited
      -- (nothing tells it from a job pruned or purged: gone, exit 6)
      jr.wait_for(function() return env:job(ids.none) == nil end, 20, "none deleted")
      out, err, code = env:cli("wait", tostring(ids.none))
      assert.equal(6, code, err)
      assert.equal(ids.none .. " gone -\n", out)
      -- the Lua client: show gives the JSON text, wait the decoded value
      local c = jr.client(env)
      local j = assert(c:show(ids.table))
      assert.same({ a = 1, b = { "x", 2.5 }, c = { d = true } }, cjson.decode(j.result))
      local got = assert(c:wait({ ids.table, ids.number, ids.string }))
      assert.same({ a = 1, b = { "x", 2.5 }, c = { d = true } }, got[1].result)
      assert.equal(42, got[2].result)
      assert.equal(math.type(42), math.type(got[2].result))
      assert.equal("héllo", got[3].result)
      assert.equal('"héllo"', got[3].result_json)
      -- SQL
      if backend == "postgres" then
        local row = env:query("SELECT (" .. env.schema .. ".outcome(" .. ids.table .. ")).*")[1]
        assert.equal("completed", row.state)
        assert.same({ a = 1, b = { "x", 2.5 }, c = { d = true } }, row.result)
        row = env:query("SELECT result->'c'->>'d' AS d FROM jobs WHERE id = " .. ids.table)[1]
        assert.equal("true", row.d)
      else
        local row = env:query("SELECT json_extract(result, '$.c.d') AS d, result FROM jobs WHERE id = "
          .. ids.table)[1]
        assert.equal(1, row.d)
        assert.same({ a = 1, b = { "x", 2.5 }, c = { d = true } }, cjson.decode(row.result))
      end
      c:close()
      assert.equal(0, env:stop())
    end)

    it("keeps the return value of jobs run many at once in coroutines (inflight)", function()
      env:config("max_result = 1000")
      env:script("co", [[
        local jobrunner = require "jobrunner"
        return { inflight = 8, max_retries = 0, handle = function(job)
          jobrunner.sleep(0.05)
          local k = job.payload.k
          if k == "big" then return string.rep("x", 2000) end
          if k == "none" then return end
          if k == "cancel" then
            while true do jobrunner.sleep(0.05) end
          end
          return { n = job.payload.n, twice = job.payload.n * 2 }
        end }]])
      local ids = {}
      for n = 1, 20 do ids[n] = env:push("co", cjson.encode({ n = n })) end
      local big = env:push("co", '{"k":"big","n":0}')
      local none = env:push("co", '{"k":"none","n":0}')
      env:start()
      local args = { "wait", "--json", "--timeout", "30" }
      for _, id in ipairs(ids) do args[#args + 1] = tostring(id) end
      args[#args + 1] = tostring(big)
      local out, err, code = env:cli(table.unpack(args))
      assert.equal(1, code, out .. err)
      local lines = {}
      for l in out:gmatch("[^\n]+") do lines[#lines + 1] = cjson.decode(l) end
      assert.equal(21, #lines)
      for n = 1, 20 do
        assert.equal("completed", lines[n].state)
        assert.same({ n = n, twice = 2 * n }, lines[n].result)
      end
      assert.equal("dead", lines[21].state)
      assert.equal(("job %d: result of 2002 bytes is over max_result (1000)"):format(big),
        lines[21].error)
      jr.wait_for(function() return env:job(none) == nil end, 20, "none deleted")
      assert.equal(0, env:stop())
    end)

    it("fails the attempt on a result over max_result, naming the job", function()
      env:config("max_result = 1000")
      env:script("r", RETURNS)
      local big = env:push("r", '{"k":"big"}')
      env:start()
      local out, err, code = env:cli("wait", tostring(big), "--json")
      assert.equal(1, code, out .. err)
      local l = cjson.decode(out)
      assert.equal("dead", l.state)
      assert.equal(("job %d: result of 70002 bytes is over max_result (1000)"):format(big),
        l.error)
      assert.equal(cjson.null, l.result)
      assert.equal(0, env:stop())
    end)

    -- the work is done: doing it again would give the same value
    it("completes a job whose return value has no JSON once, without a result, saying why", function()
      local body = jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return { max_retries = 3, inflight = INFLIGHT, handle = function(job)
          record("runs", job.name .. " " .. job.id .. " " .. job.attempt)
          if INFLIGHT > 1 then jobrunner.sleep(0.01) end
          local k = job.payload.k
          if k == "function" then return print end
          if k == "thread" then return coroutine.create(print) end
          if k == "nul" then return "a\0b" end
          jobrunner.push("after", { from = job.id })
          return { 1, a = 2 }
        end }]]
      env:script("plain", (body:gsub("INFLIGHT", "1")))
      env:script("co", (body:gsub("INFLIGHT", "4")))
      env:script("after", jr.RECORD .. [[
        return function(job) record("after", tostring(job.payload.from)) end]])
      local why = {
        ["function"] = "result not stored: result: cannot encode a function (JSON has "
          .. "tables, strings, numbers, booleans and jobrunner.null)",
        thread = "result not stored: result: cannot encode a thread (JSON has tables, "
          .. "strings, numbers, booleans and jobrunner.null)",
        nul = "result not stored: result: string holds a NUL byte (byte 2): no backend "
          .. "stores one",
        mixed = "result not stored: result: table mixes string keys and array indexes "
          .. "('a' and 1): JSON needs an object or an array",
      }
      local ids, all = {}, {}
      for _, name in ipairs({ "plain", "co" }) do
        for _, k in ipairs({ "function", "thread", "nul", "mixed" }) do
          local id = env:push(name, cjson.encode({ k = k }), "--result-ttl", "1h")
          ids[#ids + 1] = { id = id, name = name, k = k }
          all[#all + 1] = tostring(id)
        end
      end
      local gone = env:push("plain", '{"k":"function"}')     -- not kept: deleted
      env:start()
      local out, err, code = env:cli("wait", "--json", "--timeout", "60", table.unpack(all))
      assert.equal(0, code, out .. err)
      local n = 0
      for l in out:gmatch("[^\n]+") do
        n = n + 1
        local o, want = cjson.decode(l), ids[n]
        assert.equal(want.id, o.id)
        assert.equal("completed", o.state)
        assert.equal(cjson.null, o.result)
        assert.equal(cjson.null, o.error)           -- wait: failed jobs' errors only
        local row = env:job(want.id)
        assert.equal("completed", row.state)
        assert.equal(1, row.attempts)               -- no retry
        assert.equal(why[want.k], row.last_error)
        local shown = env:cli("show", tostring(want.id))
        assert.matches("last_error +" .. why[want.k]:gsub("%p", "%%%0"), shown)
        assert.matches(("job %d %%(%s%%) done in [%%d.]+ms, its %s"):format(want.id,
          want.name, why[want.k]:gsub("%p", "%%%0")), env:log())
      end
      assert.equal(#ids, n)
      -- a success: its follow-ups go in; and the job not kept is deleted
      jr.wait_for(function() return #jr.lines(env.dir .. "/after") == 2 end, 30, "follow-ups")
      jr.wait_for(function() return env:job(gone) == nil end, 20, "deleted")
      assert.matches(("job %d %%(plain%%) done in [%%d.]+ms, its result not stored"):format(gone),
        env:log())
      -- each ran once
      local runs = jr.lines(env.dir .. "/runs")
      assert.equal(#ids + 1, #runs, table.concat(runs, "\n"))
      for _, r in ipairs(runs) do assert.matches(" 1$", r) end
      assert.equal(0, env:stop())
    end)

    it("keeps a job with a result for result_ttl, and prunes it after", function()
      env:config('result_ttl = "2s"')
      env:script("r", RETURNS)
      local a = env:push("r", '{"k":"number"}')
      local b = env:push("r", '{"k":"none"}', "--result-ttl", "1h")
      local n = env:push("r", '{"k":"none"}')
      env:start()
      assert.equal(0, select(3, env:cli("wait", tostring(a), tostring(b))))
      assert.equal("completed", env:job(a).state)
      assert.equal("completed", env:job(b).state)    -- its own result_ttl
      -- a plain success nobody waited on
      jr.wait_for(function() return env:job(n) == nil end, 20, "plain success deleted")
      -- the pruner (every 5 s) removes a after its 2 s, never b
      jr.wait_for(function() return env:job(a) == nil end, 20, "result pruned")
      assert.equal("completed", env:job(b).state)
      assert.equal(0, env:stop())
    end)

    it("waits for dead and cancelled jobs, times out with 124, refuses unknown ids with 5", function()
      env:script("slow", [[
        return { max_retries = 0, handle = function(job)
          local jobrunner = require "jobrunner"
          if job.payload.fail then error("boom") end
          local t = os.time() + (job.payload.s or 0)
          while os.time() < t do
            if jobrunner.cancelled() then return end
          end
          return job.payload.n
        end }]])
      local dead = env:push("slow", '{"fail":true}')
      local long = env:push("slow", '{"s":60}')
      local ok = env:push("slow", '{"n":7}')
      env:start()
      -- a timeout: the long job runs on
      local t0 = jr.now()
      local out, err, code = env:cli("wait", tostring(long), "--timeout", "1")
      assert.equal(124, code, out .. err)
      assert.truthy(jr.now() - t0 < 10)
      assert.matches("timed out after 1s", err, 1, true)
      assert.matches("^" .. long .. " [a-z]+ %-\n$", out)
      -- cancel it while a waiter waits: exit 1, state cancelled
      local w = io.popen(("cd %s && %s -c %s wait %d %d %d; echo rc=$?"):format(env.dir, jr.bin,
        env.config_file, ok, dead, long))
      jr.sleep(0.5)
      assert.equal(0, select(3, env:cli("cancel", tostring(long))))
      out = w:read("a")
      w:close()
      assert.matches(ok .. " completed 7\n", out, 1, true)
      assert.matches(dead .. " dead %- %(.*boom", out)
      assert.matches(long .. " cancelled", out, 1, true)
      assert.matches("rc=1\n", out, 1, true)
      out, err, code = env:cli("wait", "999999")
      assert.equal(5, code)
      assert.matches("job 999999: no such job", err, 1, true)
      -- the Lua client: a timeout gives nil, the message and the outcomes
      local c = jr.client(env)
      local again = env:push("slow", '{"s":60}')
      local res, msg, outs = c:wait(again, { timeout = 0.5 })
      assert.is_nil(res)
      assert.matches("timed out", msg)
      assert.equal(again, outs[1].id)
      local got = assert(c:wait({ dead, long }))
      assert.equal("dead", got[1].state)
      assert.matches("boom", got[1].error)
      assert.equal("cancelled", got[2].state)
      assert.has_error(function() c:wait({ dead }, { timeout = -1 }) end)
      assert.has_error(function() c:wait({ dead }, { tmeout = 1 }) end)
      c:close()
      env:signal("KILL")
    end)
  end)
end

if jr.pg_url and (os.getenv("JR_BACKENDS") or "postgres"):find("postgres") then
  describe("postgres results: NOTIFY", function()
    local env = jr.test_env("postgres")

    it("a psql LISTEN on <schema>_finished receives '<id> <state>' for each kept end", function()
      env:script("r", RETURNS)
      env:script("boom", "return { max_retries = 0, handle = function() error('boom') end }")
      local out = os.tmpname()
      -- psql prints the notifications that came in while it slept
      os.execute(("psql -X -q %s -c %s -c 'SELECT pg_sleep(6)' > %s 2>&1 &"):format(
        jr.quote(jr.pg_url), jr.quote('LISTEN "' .. env.schema .. '_finished"'), out))
      jr.sleep(1)
      local kept = env:push("r", '{"k":"number"}')
      local plain = env:push("r", '{"k":"none"}')
      local dead = env:push("boom")
      env:start()
      assert.equal(1, select(3, env:cli("wait", tostring(kept), tostring(dead))))
      jr.wait_for(function() return env:job(plain) == nil end, 20, "plain success deleted")
      local text = jr.wait_for(function()
        local f = io.open(out)
        local s = f and f:read("a") or ""
        if f then f:close() end
        return s:find("pg_sleep", 1, true) and s or s:find(("%d dead"):format(dead), 1, true) and
          jr.sleep(0.2) == nil and s
      end, 20, "psql output")
      os.remove(out)
      assert.matches(('Asynchronous notification "%s_finished" with payload "%d completed"')
        :format(env.schema, kept), text, 1, true)
      assert.matches(('payload "%d dead"'):format(dead), text, 1, true)
      assert.is_nil(text:find(('payload "%d '):format(plain), 1, true))  -- deleted: none
      assert.equal(0, env:stop())
    end)
  end)
end
