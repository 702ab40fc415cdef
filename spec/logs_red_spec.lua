-- logs_red_spec.lua - each attempt's logs (docs/handlers.md, "Each
-- attempt's logs") against hostile and careless handlers, on each
-- backend: a field's name with a NUL keeps its value; a __tostring that
-- logs, or that changes the fields while the line is built, neither
-- garbles the line nor touches freed memory; a long output line is split
-- at a character's start, never into U+FFFD; a line over log.attempt_max
-- alone keeps its start (the tail of the run); a huge message costs the
-- worker no more memory than the line it keeps.
local jr = require "jr"
local cjson = require "cjson"

local FFFD = "\239\191\189"

local function lines(env, id)
  local out, err, code = env:cli("show", tostring(id), "--logs", "--json")
  assert.equal(0, code, err)
  local runs = cjson.decode(out)
  assert.equal(1, #runs, out)
  return runs[1].lines
end

-- Waits for job id to end (completed or dead), asserts it completed.
local function completed(env, id)
  local row = jr.wait_for(function()
    local r = env:job(id)
    return r and (r.state == "completed" or r.state == "dead") and r
  end, 60, ("job %d ended"):format(id))
  assert.equal("completed", row.state, row.last_error)
end

local function msgs(env, id)
  local t = {}
  for _, l in ipairs(lines(env, id)) do t[#t + 1] = l.level .. " " .. l.msg end
  return t
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": each attempt's logs, red team", function()
    local env = jr.test_env(backend)

    it("builds each line from the values it was given, whatever their Lua does", function()
      env:script("odd", [[
local jobrunner = require "jobrunner"
return function(job)
  -- a name holding a NUL, beside the name it starts with
  jobrunner.log("info", "nul", {["k\0x"] = "v", k = "w"})
  -- a __tostring that logs: its line first, the outer one whole
  local loud = setmetatable({}, {__tostring = function()
    jobrunner.log("info", "inner")
    return "OBJ"
  end})
  jobrunner.log("info", "A", loud, "B")
  -- a __tostring that empties the fields and has their names collected
  local f = {}
  for i = 1, 16 do f[string.rep("k", 64) .. i .. job.id] = i end
  local sly = setmetatable({}, {__tostring = function()
    for k in pairs(f) do f[k] = nil end
    collectgarbage(); collectgarbage()
    local keep = {}
    for i = 1, 256 do keep[i] = string.rep("j", 64) .. i .. job.id end
    f.after = "yes"
    return "msg"
  end})
  jobrunner.log("info", sly, f)
  -- values of every kind, and 64 floats (each one's text made by Lua)
  jobrunner.log("info", "kinds", {f = 0.5, t = true, no = false, i = -7,
                                  big = 2^53, s = "x"})
  local floats = {}
  for i = 1, 64 do floats["f" .. i] = i + 0.25 end
  jobrunner.log("info", "floats", floats)
  return true
end]])
      env:config('retention = { completed = "1h" }, defaults = { max_retries = 0 }')
      env:start()
      local id = env:push("odd", "{}")
      completed(env, id)
      local names = {}
      for i = 1, 64 do names[i] = "f" .. i end
      table.sort(names)
      local floats = "info floats"
      for _, k in ipairs(names) do
        floats = floats .. " " .. k .. "=" .. tostring(tonumber(k:sub(2)) + 0.25)
      end
      assert.same({
        "info nul k=w k" .. FFFD .. "x=v",
        "info inner",
        "info A OBJ B",
        "info msg after=yes",
        "info kinds big=9.007199254741e+15 f=0.5 i=-7 no=false s=x t=true",
        floats,
      }, msgs(env, id))
    end)

    it("splits a long output line at a character's start", function()
      env:script("wide", [[
local jobrunner = require "jobrunner"
return function(job)
  print("x" .. string.rep("\195\169", 5000))            -- é, one byte off
  io.stderr:write("yy" .. string.rep("\226\130\172", 3000), "\n")  -- €
  io.write("z")                                        -- a character over two writes
  io.write(string.rep("a", 8190), "\195")
  io.write("\169tail\n")
  jobrunner.log("info", "w" .. string.rep("\195\169", 5000))
  jobrunner.log("warn", string.rep("\128", 9000))     -- no character at all
end]])
      env:config('retention = { completed = "1h" }, log = { attempt_max = 1048576 }')
      env:start()
      local id = env:push("wide", "{}")
      completed(env, id)
      local got = lines(env, id)
      local by = { stdout = {}, stderr = {} }
      local bad = table.remove(got)
      assert.equal("warn", bad.level)
      assert.equal(string.rep(FFFD, 8192) .. " [line cut]", bad.msg)
      for _, l in ipairs(got) do
        assert.is_nil(l.msg:find(FFFD, 1, true), l.level .. ": " .. l.msg:sub(1, 40))
        if by[l.level] then table.insert(by[l.level], l.msg) end
      end
      for _, m in ipairs(by.stdout) do assert.is_true(#m <= 8192, #m) end
      assert.equal(4, #by.stdout)
      assert.equal("x" .. string.rep("\195\169", 5000), by.stdout[1] .. by.stdout[2])
      assert.equal("z" .. string.rep("a", 8190) .. "\195\169tail", by.stdout[3] .. by.stdout[4])
      assert.equal("yy" .. string.rep("\226\130\172", 3000), table.concat(by.stderr))
      local last = got[#got].msg
      assert.equal("info", got[#got].level)
      assert.matches(" [line cut]", last, 1, true)
    end)

    it("keeps the start of a line over the cap alone, the earlier ones dropped", function()
      env:script("dump", [[
local jobrunner = require "jobrunner"
return function(job)
  jobrunner.log("info", "before")
  print("dump " .. string.rep("\195\169", 3000))      -- 6 KiB, over the cap alone
  io.stderr:write(string.rep("\27", 900), "\n")      -- 5 KiB once escaped
end]])
      env:config('retention = { completed = "1h" }, log = { attempt_max = 2048 }')
      env:start()
      local id = env:push("dump", "{}")
      completed(env, id)
      local out, err, code = env:cli("show", tostring(id), "--logs", "--json")
      assert.equal(0, code, err)
      local run = cjson.decode(out)[1]
      -- the newest line, cut to fit: the tail of the run
      assert.equal(1, #run.lines, out)
      assert.equal(2, run.dropped_lines)
      local l = run.lines[1]
      assert.equal("stderr", l.level)
      assert.matches("^\27+ %[line cut%]$", l.msg)
      assert.is_true(#cjson.encode(l) + 1 <= 2048, #cjson.encode(l))
      assert.is_true(#cjson.encode(l) + 1 > 1500, #cjson.encode(l))
    end)

    it("keeps no line under a cap smaller than any, empty ones too, and counts them", function()
      env:script("tiny", [[
local jobrunner = require "jobrunner"
return { timeout = 3, max_retries = 0, handle = function(job)
  print()
  jobrunner.log("info", "")
  print("some text")
end }]])
      env:config('retention = { completed = "1h" }, log = { attempt_max = 10 }')
      env:start()
      local id = env:push("tiny", "{}")
      completed(env, id)
      local out, err, code = env:cli("show", tostring(id), "--logs", "--json")
      assert.equal(0, code, err)
      local run = cjson.decode(out)[1]
      assert.equal(0, #run.lines, out)
      assert.equal(3, run.dropped_lines)
    end)

    it("costs the worker no more memory for a huge message than its line", function()
      env:script("huge", [[
local jobrunner = require "jobrunner"
local function rss()
  local f = assert(io.open("/proc/self/status"))
  local s = f:read("a")
  f:close()
  return tonumber(s:match("VmRSS:%s*(%d+)"))
end
return function(job)
  local big = string.rep("a", 48 << 20)
  collectgarbage(); collectgarbage()
  local before = rss()
  jobrunner.log("info", big)
  jobrunner.log("info", "m", {big = big})
  local grew = rss() - before
  if grew >= 8192 then error("the worker grew by " .. grew .. " KiB", 0) end
end]])
      env:config('retention = { completed = "1h" }, log = { echo = false },' ..
                 ' defaults = { max_retries = 0 }')
      env:start()
      local id = env:push("huge", "{}")
      completed(env, id)
      local got = lines(env, id)
      assert.equal(2, #got)
      assert.matches("^a+ %[line cut%]$", got[1].msg)
      assert.matches("^m big=a+ %[line cut%]$", got[2].msg)
    end)
  end)
end
