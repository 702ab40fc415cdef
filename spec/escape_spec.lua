-- escape_spec.lua - text from a handler (its error, its output) carries
-- control bytes and a newline followed by what looks like a log line: the
-- runner's text log holds no raw ESC, BEL, CR or NUL and no forged line,
-- `show`, `list` and `dead list` print the escaped form, and `show --json`
-- gives the text back as it was stored.
local jr = require "jr"
local cjson = require "cjson"

-- what the handler errors with and prints
local TEXT = "a\27[31mb\r\7c\0d\n2026-01-01 fake line"
-- what is stored: a Lua error's text is a C string, cut at its NUL, and
-- the traceback follows on the next lines
local STORED = "a\27[31mb\r\7c"
-- its escaped form, as the CLI prints it
local SHOWN = [[a\x1b[31mb\r\x07c]]

local function evil(env)
  env:script("evil", ([[
    return { max_retries = 0, handle = function(job)
      local t = %q
      print(t)
      print("bad \255 byte, C1 \194\155[31m, tab\t, back\\slash")
      io.stderr:write(t, "\n")
      error(t, 0)
    end }]]):format(TEXT))
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": a handler's control bytes", function()
    local env = jr.test_env(backend)

    it("are escaped in the log and the CLI, kept in --json", function()
      evil(env)
      local id = env:push("evil")
      env:start()
      env:wait_state(id, "dead", 60)
      env:stop()
      local log = env:log()
      assert.truthy(log:find("job " .. id .. " (evil) output: a", 1, true), log)
      for _, b in ipairs({ "\27", "\7", "\r", "\0" }) do
        assert.falsy(log:find(b, 1, true), ("byte %d in the log:\n%s"):format(b:byte(), log))
      end
      for line in log:gmatch("[^\n]*") do
        assert.falsy(line:find("^2026%-01%-01 fake"), line)
      end
      assert.truthy(log:find([[output: a\x1b[31mb\r\x07c?d]] .. "\n", 1, true), log)
      assert.truthy(log:find([[output: bad \xff byte, C1 \xc2\x9b[31m, tab\t, back\\slash]], 1, true), log)
      assert.truthy(log:find([[dead after 1 attempt: a\x1b[31mb\r\x07c]], 1, true), log)
      assert.falsy(log:find("\194\155", 1, true), log)

      local out, err, code = env:cli("show", tostring(id))
      assert.equal(0, code, err)
      -- the error's first line escaped, its traceback's lines indented
      assert.truthy(out:find("\nlast_error    " .. SHOWN .. "\n              stack traceback:\n", 1, true), out)
      assert.falsy(out:find("\27", 1, true), out)
      assert.falsy(out:find("\r", 1, true), out)
      assert.falsy(out:find("\7", 1, true), out)

      out, err, code = env:cli("list", "--state", "dead")
      assert.equal(0, code, err)
      assert.truthy(out:find(SHOWN, 1, true), out)
      assert.falsy(out:find("[\27\r\7]"), out)

      out, err, code = env:cli("dead", "list")
      assert.equal(0, code, err)
      assert.truthy(out:find(SHOWN, 1, true), out)
      assert.falsy(out:find("[\27\r\7]"), out)

      out, err, code = env:cli("show", tostring(id), "--json")
      assert.equal(0, code, err)
      local j = cjson.decode(out)
      assert.equal(STORED .. "\nstack traceback:", j.last_error:match("^[^\n]*\n[^\n]*"))
      assert.equal(STORED .. "\nstack traceback:", j.attempts[1].error:match("^[^\n]*\n[^\n]*"))
      out, err, code = env:cli("dead", "list", "--json")
      assert.equal(0, code, err)
      assert.equal(j.last_error, cjson.decode(out)[1].last_error)
    end)

    it("in a payload (DEL, a C1 control) print as JSON escapes", function()
      env:script("evil", "return function(job) end")
      local id = env:push("evil", '{"s":"x\194\155[31m\127y"}', "--at", "2099-01-01T00:00:00Z")
      local out, err, code = env:cli("show", tostring(id))
      assert.equal(0, code, err)
      assert.truthy(out:find([[payload       {"s":"x\u009b[31m\u007fy"}]], 1, true)
                    or out:find([[payload       {"s": "x\u009b[31m\u007fy"}]], 1, true), out)
      assert.falsy(out:find("\194\155", 1, true), out)
      assert.falsy(out:find("\127", 1, true), out)
      out, err, code = env:cli("show", tostring(id), "--json")
      assert.equal(0, code, err)
      assert.equal("x\194\155[31m\127y", cjson.decode(out).payload.s)
    end)

    it("in a limit key print escaped in show and limits", function()
      env:script("lk", "return function(job) end")
      env:config([[limits = { lk = { per_key = { concurrency = 1 } } }]])
      local key = "k\27]0;title\7\r\n2026-01-01 fake"
      local shown = [[k\x1b]0;title\x07\r\n2026-01-01 fake]]
      local id = env:push("lk", "{}", "--key", key, "--at", "2099-01-01T00:00:00Z")
      local out, err, code = env:cli("show", tostring(id))
      assert.equal(0, code, err)
      assert.truthy(out:find("\nkey           " .. shown .. "\n", 1, true), out)
      assert.falsy(out:find("[\27\7\r]"), out)
      out, err, code = env:cli("show", tostring(id), "--json")
      assert.equal(0, code, err)
      assert.equal(key, cjson.decode(out).key)
      out, err, code = env:cli("limits")
      assert.equal(0, code, err)
      assert.truthy(out:find("  key " .. shown, 1, true), out)
      assert.falsy(out:find("[\27\7\r]"), out)
    end)

    it("stay valid JSON in a JSON log", function()
      evil(env)
      env:config('log = { format = "json" }')
      local id = env:push("evil")
      env:start()
      env:wait_state(id, "dead", 60)
      env:stop()
      local log, msgs = env:log(), {}
      assert.falsy(log:find("[\27\7\r%z]"), log)
      for line in log:gmatch("[^\n]+") do
        msgs[#msgs + 1] = cjson.decode(line).msg
      end
      local all = table.concat(msgs, "\n")
      -- a NUL in handler output is logged as '?' (a log message is a C string)
      assert.truthy(all:find(("job %d (evil) output: a\27[31mb\r\7c?d\n"):format(id), 1, true), all)
      assert.truthy(all:find("output: bad \239\191\189 byte, C1 \194\155[31m, tab\t, back\\slash", 1, true), all)
      assert.truthy(all:find("dead after 1 attempt: a\27[31mb\r\7c", 1, true), all)
    end)
  end)
end
