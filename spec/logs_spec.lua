-- logs_spec.lua - each attempt's logs (docs/handlers.md, "Each attempt's
-- logs"), on each backend: jobrunner.log's lines (fields as key=value)
-- and print, io.write, io.stdout/io.stderr:write are kept per run with
-- the job, a retried job's attempts apart, shown by `show --logs`
-- (--attempt, --json) and GET /api/jobs/ID/logs; the cap keeps the tail
-- and counts what it dropped; control bytes and bytes that are not UTF-8
-- are stored and shown safely; a job that logs nothing has no logs; the
-- logs go with the job (dead purge); log.echo and log.attempt_max = 0; a
-- program's own output goes to the runner's log, what the handler reads
-- of it and prints is kept.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

-- Logs and prints in every way; fails its first attempt.
local LOGGER = [[
local jobrunner = require "jobrunner"
return function(job)
  jobrunner.log("info", "hello " .. job.attempt, {user = "ada", n = 3, note = "a b"})
  jobrunner.log("warn", "two", "values")
  print("printed", job.attempt)
  io.write("partial ")
  io.write("line\n")
  io.stderr:write("to stderr\n")
  io.stdout:write("no newline at the end")
  if job.attempt == 1 then error("boom", 0) end
end
]]

local function show_logs(env, id, ...)
  local out, err, code = env:cli("show", tostring(id), "--logs", ...)
  return out, err, code
end

-- 1 if job id's logs column is NULL.
local function no_column(env, id)
  local v = env:query(("SELECT logs FROM jobs WHERE id = %d"):format(id))[1].logs
  return v == nil or v == cjson.null
end

local function msgs(run)
  local t = {}
  for _, l in ipairs(run.lines) do t[#t + 1] = l.level .. " " .. l.msg end
  return t
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": each attempt's logs", function()
    local env = jr.test_env(backend)

    it("stores a line's fields as their text, with log.echo off", function()
      -- not echoed, a line is kept as its pieces and its text made where
      -- it is stored: the same text as a line echoed
      env:script("fields", [[
local jobrunner = require "jobrunner"
return function(job)
  local f = {user = "ada", n = 3, note = "a b", e = "", eq = "x=y", x = 1.5, ok = true}
  for i = 1, 2 do jobrunner.log("info", "step done", f) end
  jobrunner.log("warn", "tab", {k = "a\tb", q = 'say "hi"'})
  jobrunner.log("error", "plain")
end]])
      env:config('retention = { completed = "1h" }, log = { echo = false }')
      env:start()
      local id = env:push("fields", "{}")
      env:wait_state(id, "completed", 30)
      local out, err, code = show_logs(env, id, "--json")
      assert.equal(0, code, err)
      local run = cjson.decode(out)[1]
      local line = 'info step done e="" eq="x=y" n=3 note="a b" ok=true user=ada x=1.5'
      assert.same({line, line, 'warn tab k="a\tb" q="say \\"hi\\""', "error plain"},
        msgs(run))
      assert.equal(0, run.dropped_lines)
    end)

    it("keeps each attempt's lines apart, shown by show --logs and the API", function()
      env:script("logger", LOGGER)
      env:script("quiet", "return function() end")
      local base = H.start(env, 'retention = { completed = "1h" },' ..
        " defaults = { backoff = 0 }")
      local id = env:push("logger", "{}")
      local quiet = env:push("quiet", "{}")
      env:wait_state(id, "completed", 30)
      env:wait_state(quiet, "completed", 30)
      local out, err, code = show_logs(env, id, "--json")
      assert.equal(0, code, err)
      local runs = cjson.decode(out)
      assert.equal(2, #runs)
      for i, run in ipairs(runs) do
        assert.equal(i, run.attempt)
        assert.equal(0, run.dropped_lines)
        assert.same({
          "info hello " .. i .. " n=3 note=\"a b\" user=ada",
          "warn two values",
          "stdout printed\t" .. i,
          "stdout partial line",
          "stderr to stderr",
          "stdout no newline at the end",
        }, msgs(run))
        assert.is_number(run.lines[1].at)
      end
      assert.is_true(runs[1].at <= runs[2].at)
      -- one attempt
      out, err, code = show_logs(env, id, "--attempt", "2", "--json")
      assert.equal(0, code, err)
      runs = cjson.decode(out)
      assert.equal(1, #runs)
      assert.equal(2, runs[1].attempt)
      -- the text form
      out = show_logs(env, id)
      assert.matches("attempt 1 ", out, 1, true)
      assert.matches("attempt 2 ", out, 1, true)
      assert.matches("info    hello 2 n=3", out, 1, true)
      assert.matches("stdout  printed\\t2", out, 1, true)
      -- a job that logged nothing has none, and pays no column
      out, err, code = show_logs(env, quiet)
      assert.equal(0, code, err)
      assert.matches("no logs kept", out, 1, true)
      assert.is_true(no_column(env, quiet))
      -- the API
      local api = H.json(base .. "/api/jobs/" .. id .. "/logs")
      assert.equal(id, api.id)
      assert.equal(2, #api.runs)
      assert.equal("info hello 1 n=3 note=\"a b\" user=ada", msgs(api.runs[1])[1])
      api = H.json(base .. "/api/jobs/" .. id .. "/logs?attempt=1")
      assert.equal(1, #api.runs)
      assert.equal(1, api.runs[1].attempt)
      H.json(base .. "/api/jobs/999999/logs", 404)
      H.json(base .. "/api/jobs/" .. id .. "/logs?attempt=x", 400)
      H.json(base .. "/api/jobs/" .. id .. "/logs?bogus=1", 400)
      -- no job: exit 5
      local _, e2, c2 = show_logs(env, 999999)
      assert.equal(5, c2)
      assert.matches("no job with id 999999", e2, 1, true)
      -- the runner's log keeps them too (log.echo's default)
      assert.matches(("job %d (logger) output: printed"):format(id), env:log(), 1, true)
    end)

    it("keeps the tail within log.attempt_max, counts the rest; a purge takes them", function()
      env:script("chatty", [[
local jobrunner = require "jobrunner"
return function(job)
  print(string.rep("x", 20000))
  for i = 1, 300 do jobrunner.log("info", "line " .. i) end
  print("last")
  jobrunner.discard("done talking")
end]])
      env:config('log = { attempt_max = 4096, echo = false }')
      env:start()
      local id = env:push("chatty", "{}")
      env:wait_state(id, "dead", 30)
      local out, err, code = show_logs(env, id, "--json")
      assert.equal(0, code, err)
      local run = cjson.decode(out)[1]
      local kept = msgs(run)
      assert.equal("stdout last", kept[#kept])
      assert.is_true(run.dropped_lines > 200, out)
      assert.is_true(run.dropped_bytes > 300 * 40, out)
      local bytes = 0
      for _, l in ipairs(run.lines) do bytes = bytes + #cjson.encode(l) + 1 end
      assert.is_true(bytes <= 4096, "kept " .. bytes)
      -- the lines kept are the newest, in order, none missing between
      local first = tonumber(kept[1]:match("^info line (%d+)$"))
      assert.is_true(first and first > 200, kept[1])
      assert.equal(300 - first + 1 + 1, #kept)  -- and last
      -- log.echo = false: the runner's log has none of it
      assert.is_nil(env:log():find("line 299", 1, true))
      out = show_logs(env, id)
      assert.matches("earlier lines dropped", out, 1, true)
      -- gone with its job
      local _, e, c = env:cli("dead", "purge")
      assert.equal(0, c, e)
      local _, e2, c2 = show_logs(env, id)
      assert.equal(5, c2, e2)
    end)

    it("stores and shows control bytes and bytes that are not UTF-8 safely", function()
      env:script("evil", [[
local jobrunner = require "jobrunner"
return function(job)
  print("a\27[31mb\r\7c\0d")
  jobrunner.log("error", "bad \255 byte, C1 \194\155[31m", {k = "v\27]0;x\7"})
end]])
      local base = H.start(env, 'retention = { completed = "1h" }')
      local id = env:push("evil", "{}")
      env:wait_state(id, "completed", 30)
      local out, err, code = show_logs(env, id)
      assert.equal(0, code, err)
      assert.is_nil(out:find("\27", 1, true), out)
      assert.is_nil(out:find("\7", 1, true), out)
      assert.is_nil(out:find("\194\155", 1, true), out)
      assert.matches([[a\x1b[31mb\r\x07c]] .. "\239\191\189" .. "d", out, 1, true)
      assert.matches([[bad ]] .. "\239\191\189" .. [[ byte, C1 \xc2\x9b[31m k="v\x1b]0;x\x07"]], out, 1, true)
      -- the API's JSON is valid and holds the text, NUL and bad bytes as U+FFFD
      local api = H.json(base .. "/api/jobs/" .. id .. "/logs")
      local m = msgs(api.runs[1])
      assert.equal("stdout a\27[31mb\r\7c\239\191\189d", m[1])
      assert.equal("error bad \239\191\189 byte, C1 \194\155[31m k=\"v\27]0;x\7\"", m[2])
      out = show_logs(env, id, "--json")
      assert.is_nil(out:find("\27", 1, true))
      assert.equal(m[1], msgs(cjson.decode(out)[1])[1])
    end)

    it("refuses a bad level, nested fields and an out-of-range cap, naming them", function()
      env:script("bad", [[
local jobrunner = require "jobrunner"
return function(job)
  if job.payload.k == "level" then jobrunner.log("loud", "x") end
  if job.payload.k == "nested" then jobrunner.log("info", "x", {deep = {1}}) end
  jobrunner.log("info", "x", {[1] = "list"})
end]])
      env:config('log = { attempt_max = 2000000 }')
      local _, err, code = env:cli("check")
      assert.are_not.equal(0, code)
      assert.matches("log.attempt_max", err, 1, true)
      assert.matches("0 to 1048576", err, 1, true)
      env:config('defaults = { max_retries = 0 }')
      env:start()
      local ids = { level = env:push("bad", '{"k": "level"}'),
                    nested = env:push("bad", '{"k": "nested"}'),
                    list = env:push("bad", '{"k": "list"}') }
      local want = { level = "invalid option 'loud'",
                     nested = "jobrunner.log: field 'deep' must be a string, number or boolean, got table",
                     list = "jobrunner.log: fields must be a table of name = value, found a number key" }
      for k, id in pairs(ids) do
        local row = env:wait_state(id, "dead", 30)
        assert.matches(want[k], row.last_error, 1, true)
      end
    end)

    it("keeps a coroutine job's output as its own, with a result_ttl; attempt_max = 0 keeps nothing", function()
      env:script("co", [[
local jobrunner = require "jobrunner"
return {
  inflight = 4,
  handle = function(job)
    print("start " .. job.payload.n)
    jobrunner.sleep(0.05)
    print("end " .. job.payload.n)
  end,
}]])
      env:start()
      local ids = {}   -- kept for their result_ttl: the batch's kept successes
      for n = 1, 3 do ids[n] = env:push("co", ('{"n": %d}'):format(n), "--result-ttl", "1h") end
      for n = 1, 3 do
        env:wait_state(ids[n], "completed", 30)
        local out = show_logs(env, ids[n], "--json")
        assert.same({ "stdout start " .. n, "stdout end " .. n }, msgs(cjson.decode(out)[1]))
      end
      env:stop()
      env:config('retention = { completed = "1h" }, log = { attempt_max = 0 }')
      env:start()
      local id = env:push("co", '{"n": 9}')
      env:wait_state(id, "completed", 30)
      assert.is_true(no_column(env, id))
      jr.wait_for(function()
        return env:log():find(("job %d (co) output: end 9"):format(id), 1, true)
      end, 10, "output logged")
    end)

    it("leaves a started program's own output to the runner's log; what the handler reads of it and prints is kept", function()
      env:script("child", [[
local jobrunner = require "jobrunner"
return function(job)
  os.execute("echo child-direct")
  local r = assert(jobrunner.exec({ "sh", "-c", "echo child-read; echo child-err >&2" }))
  io.write(r.stdout)
  io.stderr:write(r.stderr)
end]])
      env:config('retention = { completed = "1h" }')
      env:start()
      local id = env:push("child", "{}")
      env:wait_state(id, "completed", 30)
      local out = show_logs(env, id, "--json")
      assert.same({ "stdout child-read", "stderr child-err" }, msgs(cjson.decode(out)[1]))
      jr.wait_for(function()
        return env:log():find(("job %d (child) output: child-direct"):format(id), 1, true)
      end, 10, "the program's own output in the runner's log")
      env:stop()
    end)

    it("keeps what a handler with output = \"keep\" and its programs write to descriptors 1 and 2", function()
      local bad = env:script("keepco", 'return { output = "keep", inflight = 2, handle = function() end }')
      local out, err, code = env:cli("check")
      assert.equal(3, code)
      assert.matches(bad, out .. err, 1, true)
      assert.matches("'output' = \"keep\" needs inflight 1", out .. err, 1, true)
      os.remove(bad)
      env:script("keeper", [[
return {
  output = "keep",
  handle = function(job)
    print("lua line")
    os.execute("echo child-out; echo child-err >&2")
    local p = io.popen("echo popen-err >&2; echo popen-out")
    local got = p:read("a")
    p:close()
    print("read " .. got:gsub("\n", ""))
  end,
}]])
      env:script("plain", [[return function(job) os.execute("echo plain-out") end]])
      env:config('retention = { completed = "1h" }')
      env:start()
      local id = env:push("keeper", "{}")
      local other = env:push("plain", "{}")
      env:wait_state(id, "completed", 30)
      env:wait_state(other, "completed", 30)
      out = show_logs(env, id, "--json")
      assert.same({ "stdout lua line", "stdout read popen-out", "stdout child-out",
                    "stderr child-err", "stderr popen-err" }, msgs(cjson.decode(out)[1]))
      -- passed on to the runner's log as well (log.echo); a handler without
      -- the option keeps none of it
      jr.wait_for(function()
        local log = env:log()
        return log:find(("job %d (keeper) output: child-out"):format(id), 1, true) and
               log:find(("job %d (plain) output: plain-out"):format(other), 1, true)
      end, 10, "the output in the runner's log")
      assert.is_true(no_column(env, other))
      env:stop()
    end)
  end)
end
