-- badinput_spec.lua - bad input on each backend: bad pushes, config typos,
-- broken handlers, handlers that raise odd errors, exit, loop or kill their
-- worker. Each asserts the message a user sees (file:line, key, job id) and
-- that no job is lost.
local jr = require "jr"
local cjson = require "cjson"

-- Reads the id of the runner's worker from inside a handler: the first
-- field of /proc/self/stat is the pid of the process running the Lua.
local SELF_PID = [[
  local function self_pid()
    local f = assert(io.open("/proc/self/stat"))
    local pid = f:read("a"):match("^(%d+)")
    f:close()
    return pid
  end
]]

local RECORD = jr.RECORD

local lines = jr.lines

local function wait_state(env, ...) return env:wait_state(...) end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " bad input:", function()
    local env = jr.test_env(backend, { config = "concurrency = 2" })

    -- Schema exists, so "nothing inserted" can be checked with a count.
    local function migrated()
      local _, err, code = env:cli("migrate")
      assert.equal(0, code, err)
    end

    describe("push", function()
      it("refuses invalid JSON with exit status 2, naming the problem, inserting nothing", function()
        migrated()
        for _, bad in ipairs({ "{bad", '{"a":1', "[1,2", "nope", '{"a":1}x' }) do
          local out, err, code = env:cli("push", "hello", bad)
          assert.equal(2, code, bad)
          assert.matches("invalid JSON", err, 1, true)
          assert.matches("hello", err, 1, true)
          assert.equal("", out)
        end
        assert.equal(0, env:count())
      end)

      it("refuses job names outside [A-Za-z0-9_.:-]{1,128}", function()
        migrated()
        local bad = {
          ("a"):rep(129), "a b", "it's", 'say"hi"', "", "a/b", "naïve",
          "'); DROP TABLE jobs; --",
        }
        for _, name in ipairs(bad) do
          local out, err, code = env:cli("push", name, "{}")
          assert.equal(2, code, name)
          assert.matches(name == "" and "empty job name" or "invalid job name", err, 1, true)
          assert.equal("", out)
        end
        local _, err = env:cli("push", ("a"):rep(129), "{}")
        assert.matches("129 characters, at most 128", err, 1, true)
        _, err = env:cli("push", "a b", "{}")
        assert.matches("'a b'", err, 1, true)
        assert.matches("[A-Za-z0-9_.:-]", err, 1, true)
        -- a name's or queue's control bytes reach the terminal escaped
        _, err = env:cli("push", "a\27[31mb", "{}")
        assert.matches("invalid job name 'a\\x1b[31mb'", err, 1, true)
        _, err = env:cli("push", "ok", "{}", "--queue", "q\27]0;x\7")
        assert.matches("invalid queue name 'q\\x1b]0;x\\x07'", err, 1, true)
        assert.is_nil(err:find("\27", 1, true))
        assert.equal(0, env:count())
        -- the longest valid name and every allowed character are accepted
        local id = env:push(("b"):rep(128))
        assert.equal(("b"):rep(128), env:job(id).name)
        id = env:push("Az09_.:-")
        assert.equal("Az09_.:-", env:job(id).name)
      end)

      it("stores a payload full of quotes and SQL verbatim", function()
        local payload = {
          sql = "'); DROP TABLE jobs; --",
          q = [["double" 'single' `back` \ \\ $x %s ?]],
          nested = { "';--", { k = "\"'\"" } },
          uni = "zürich ☃ 日本",
        }
        local json = cjson.encode(payload)
        local id = env:push("quotes", json, "--queue", "q:1")
        local row = env:job(id)
        assert.equal("quotes", row.name)
        assert.same(payload, cjson.decode(row.payload))
        assert.equal(1, env:count())
        -- and the handler sees the same table
        env:script("quotes", RECORD .. [[
          local cjson = require "cjson"
          return function(job) record("seen", cjson.encode(job.payload)) end]])
        env:start()
        jr.wait_for(function() return env:count() == 0 end)
        assert.same(payload, cjson.decode(lines(env.dir .. "/seen")[1]))
      end)

      it("refuses bad --in, --at, --priority, --max-retries values with exit status 2", function()
        migrated()
        local cases = {
          { "--in", "foo", "invalid --in 'foo'" },
          { "--in", "-5s", "invalid --in '-5s'" },
          { "--in", "", "invalid --in" },
          { "--at", "yesterday", "invalid --at 'yesterday'" },
          { "--at", "2026-13-45T99:00:00Z", "invalid --at" },
          { "--priority", "abc", "invalid --priority 'abc'" },
          { "--priority", "1.5", "invalid --priority '1.5'" },
          { "--priority", "99999999999999999999", "invalid --priority" },
          { "--max-retries", "-1", "invalid --max-retries '-1'" },
          { "--max-retries", "x", "invalid --max-retries 'x'" },
          -- what strtod and strtol also take: hex, blanks, a plus sign
          { "--in", "0x10", "invalid --in '0x10'" },
          { "--in", " 5", "invalid --in ' 5'" },
          { "--in", "5 ", "invalid --in '5 '" },
          { "--at", "@0x10", "invalid --at '@0x10'" },
          { "--at", "@ 5", "invalid --at '@ 5'" },
          { "--priority", " 5", "invalid --priority ' 5'" },
          { "--priority", "+5", "invalid --priority '+5'" },
          { "--max-retries", "0x3", "invalid --max-retries '0x3'" },
          -- control bytes of a refused value are quoted escaped
          { "--in", "5\27[2J", "invalid --in '5\\x1b[2J'" },
          { "--priority", "1\7", "invalid --priority '1\\x07'" },
          -- an option of what a parent's failure does, with no parent
          { "--on-parent-failure", "run", "--on-parent-failure goes with --after" },
        }
        for _, c in ipairs(cases) do
          local out, err, code = env:cli("push", "x", "{}", c[1], c[2])
          assert.equal(2, code, c[1] .. " " .. c[2])
          assert.matches(c[3], err, 1, true)
          assert.equal("", out)
        end
        -- the error says what is expected
        local _, err = env:cli("push", "x", "{}", "--in", "foo")
        assert.matches("30s", err, 1, true)
        -- --in and --at together are refused
        local _, _, code = env:cli("push", "x", "{}", "--in", "1s", "--at", "@2000000000")
        assert.equal(2, code)
        -- an option without its value
        _, err, code = env:cli("push", "x", "{}", "--priority")
        assert.equal(2, code)
        assert.matches("--priority", err, 1, true)
        assert.equal(0, env:count())
      end)

      it("refuses an unknown option with exit status 2", function()
        migrated()
        local out, err, code = env:cli("push", "x", "{}", "--bogus")
        assert.equal(2, code)
        assert.matches("unknown option '--bogus'", err, 1, true)
        assert.matches("--help", err, 1, true)
        assert.equal("", out)
        assert.equal(0, env:count())
      end)
    end)

    describe("config", function()
      local function write(text)
        jr.write_file(env.config_file, text)
      end
      local head
      before_each(function()
        head = ("return {\n  backend = %q,\n%s  scripts = %q,\n"):format(env.url,
          env.schema and ("  schema = %q,\n"):format(env.schema) or "",
          env.dir .. "/scripts")
        env:script("ok", "return function() end")
      end)
      -- line number of the line after head
      local function next_line()
        local _, n = head:gsub("\n", "")
        return n + 1
      end

      local function refused(expect_plain)
        for _, cmd in ipairs({ { "check" }, { "push", "ok", "{}" }, { "stats" } }) do
          local out, err, code = env:cli(table.unpack(cmd))
          assert.equal(3, code, cmd[1] .. ": " .. out .. err)
          for _, s in ipairs(expect_plain) do
            assert.matches(s, err, 1, true)
          end
        end
        -- the runner refuses to start, with the same message
        local p = env:start()
        jr.wait_for(function() return not env:alive(p) end, 10, "runner exit")
        assert.equal(3, env:stop("TERM", p))
        for _, s in ipairs(expect_plain) do
          assert.matches(s, env:log(p), 1, true)
        end
      end

      it("check refuses what run refuses at its start: a backend no engine takes, an unwritable handler_output", function()
        local cases = {
          { 'return { backend = "mysql://x", scripts = %q }', "unknown backend URL 'mysql://x'" },
          { 'return { backend = "sqlite:", scripts = %q }', "empty database path" },
          { 'return { backend = "sqlite:' .. env.dir .. '/j.db", handler_output = "/nonexistent/dir/out.log", scripts = %q }',
            "handler_output: cannot create '/nonexistent/dir/out.log'" },
        }
        for _, c in ipairs(cases) do
          write(c[1]:format(env.dir .. "/scripts"))
          local out, err, code = env:cli("check")
          assert.equal(3, code, c[2] .. ": " .. out .. err)
          assert.matches(c[2], err, 1, true)
        end
        -- a handler_output file it may create passes, and is not created
        write(('return { backend = "sqlite:%s/j.db", handler_output = "%s/out.log", scripts = %q }')
          :format(env.dir, env.dir, env.dir .. "/scripts"))
        local out, err, code = env:cli("check")
        assert.equal(0, code, out .. err)
        assert.is_nil(io.open(env.dir .. "/out.log"))
      end)

      it("names an unknown top-level key, its file:line and the valid keys", function()
        write(head .. "  concurency = 2,\n}\n")
        refused({
          ("%s:%d:"):format(env.config_file, next_line()),
          "unknown key 'concurency'",
          "valid keys", "backend", "scripts", "concurrency", "defaults", "lease",
        })
      end)

      it("names an unknown nested key with its path and file:line", function()
        write(head .. "  defaults = {\n    retries = 3,\n  },\n}\n")
        refused({
          ("%s:%d:"):format(env.config_file, next_line() + 1),
          "defaults.retries", "max_retries", "timeout", "backoff",
        })
      end)

      it("names a key of the wrong type", function()
        write(head .. '  lease = "x",\n}\n')
        refused({ env.config_file .. ":", "'lease'", "number", "string" })
      end)

      it("refuses concurrency = 0", function()
        write(head .. "  concurrency = 0,\n}\n")
        refused({ env.config_file .. ":", "'concurrency'" })
      end)

      it("refuses an unknown log level", function()
        write(head .. '  log = { level = "loud" },\n}\n')
        refused({ env.config_file .. ":", "log.level", "debug", "info", "warn", "error" })
      end)

      it("reports a syntax error with file:line", function()
        write(head .. "  lease = = 3,\n}\n")
        refused({ ("%s:%d:"):format(env.config_file, next_line()), "near '='" })
      end)

      it("refuses a config that returns a non-table", function()
        write("return 42\n")
        refused({ env.config_file, "must return a table", "number" })
      end)
    end)

    describe("handlers", function()
      it("check reports a syntax error with file:line and exits 3", function()
        env:script("good", "return function() end")
        local path = env:script("syn", "return function(job)\n  local x = = 1\nend\n")
        local out, err, code = env:cli("check")
        assert.equal(3, code)
        assert.matches(path .. ":2:", out .. err, 1, true)
      end)

      it("the runner logs a broken handler with file:line and runs the others", function()
        env:script("good", RECORD .. "return function(job) record('good', job.id) end")
        local syn = env:script("syn", "return function(job)\n  local x = = 1\nend\n")
        local num = env:script("num", "return 42\n")
        local noh = env:script("noh", "return { max_retries = 2 }\n")
        local opt = env:script("opt", "return { handle = function() end, retires = 3 }\n")
        env:start()
        local log = env:log()
        assert.matches(syn .. ":2:", log, 1, true)
        assert.matches(num .. ":", log, 1, true)
        assert.matches("returned number", log, 1, true)
        assert.matches(noh .. ":", log, 1, true)
        assert.matches("'handle'", log, 1, true)
        assert.matches(opt .. ":", log, 1, true)
        assert.matches("'retires'", log, 1, true)
        local id = env:push("good")
        local bad = env:push("syn")
        jr.wait_file(env.dir .. "/good")
        assert.same({ tostring(id) }, lines(env.dir .. "/good"))
        jr.wait_for(function() return env:count() == 1 end)
        -- the job whose handler did not load is kept, unclaimed, and shown
        local row = env:job(bad)
        assert.equal("queued", row.state)
        assert.equal(0, row.attempts)
        assert.same({ "syn" }, env:stats().unhandled)
        assert.equal(0, env:stop())
      end)

      it("check names a file returning neither function nor table", function()
        local path = env:script("num", "return 42\n")
        local out, err, code = env:cli("check")
        assert.equal(3, code)
        assert.matches(path, out .. err, 1, true)
        assert.matches("returned number", out .. err, 1, true)
      end)

      it("check names the file and line of a handler that yields while loading", function()
        local path = env:script("yields", "local x = 1\ncoroutine.yield(x)\n" ..
          "return function() end\n")
        local out, err, code = env:cli("check")
        assert.equal(3, code)
        assert.matches(path .. ":2: attempt to yield from outside a coroutine",
          out .. err, 1, true)
      end)

      it("check names a table without handle", function()
        local path = env:script("noh", "return { max_retries = 2 }\n")
        local out, err, code = env:cli("check")
        assert.equal(3, code)
        assert.matches(path, out .. err, 1, true)
        assert.matches("'handle'", out .. err, 1, true)
      end)

      it("check names an unknown handler option and the valid ones", function()
        local path = env:script("opt", "return { handle = function() end, retires = 3 }\n")
        local out, err, code = env:cli("check")
        assert.equal(3, code)
        assert.matches(path, out .. err, 1, true)
        assert.matches("unknown handler option 'retires'", out .. err, 1, true)
        assert.matches("max_retries", out .. err, 1, true)
      end)

      it("check names a handler with a bad option value", function()
        local path = env:script("opt", "return { handle = function() end, timeout = 'soon' }\n")
        local out, err, code = env:cli("check")
        assert.equal(3, code)
        assert.matches(path, out .. err, 1, true)
        assert.matches("timeout", out .. err, 1, true)
      end)

      it("check names an invalid file name", function()
        local path = env.dir .. "/scripts/bad name.lua"
        jr.write_file(path, "return function() end\n")
        local out, err, code = env:cli("check")
        assert.equal(3, code)
        assert.matches(path, out .. err, 1, true)
        assert.matches("'bad name'", out .. err, 1, true)
      end)

      it("check passes a clean scripts dir", function()
        env:script("a", "return function() end")
        env:script("b.c", "return { max_retries = 1, handle = function() end }")
        env:script("_helper", "return {}")
        local out, err, code = env:cli("check")
        assert.equal(0, code, err)
        assert.matches("2 handlers loaded", out .. err, 1, true)
      end)

      it("fails a job whose handler raises a table or nil, with a readable last_error", function()
        env:script("tab", [[
          return { max_retries = 0, handle = function() error({ code = 42 }) end }]])
        env:script("nilerr", [[
          return { max_retries = 0, handle = function() error(nil) end }]])
        env:script("fn", [[
          return { max_retries = 0,
                   handle = function() error({ f = function() end }) end }]])
        env:script("obj", [[
          local mt = { __tostring = function() return "custom error object" end }
          return { max_retries = 0,
                   handle = function() error(setmetatable({}, mt)) end }]])
        env:start()
        local t = env:push("tab")
        local n = env:push("nilerr")
        local o = env:push("obj")
        local f = env:push("fn")
        for _, id in ipairs({ t, n, o, f }) do
          local row = wait_state(env, id, "dead")
          assert.is_string(row.last_error)
          assert.is_true(#row.last_error > 0, "empty last_error")
          assert.not_matches("^table: 0x", row.last_error)
          assert.not_matches("^nil$", row.last_error)
        end
        -- a table with a JSON text is given as it (its fields readable)
        assert.matches('^{"code":42}', env:job(t).last_error)
        assert.matches("nil", env:job(n).last_error)
        assert.matches("custom error object", env:job(o).last_error, 1, true)
        -- one JSON cannot hold: its type named
        assert.matches("^error object is a table value", env:job(f).last_error)
        assert.equal(0, env:stop())
      end)

      it("stores no result for a value JSON cannot hold; keeps a first value that it can", function()
        env:script("garbage", [[
          return { max_retries = 0, handle = function()
            return function() end, coroutine.create(print), 1 / 0, nil, {} end }]])
        env:script("err", "return function() return false, 'oops' end")
        env:start()
        local g = env:push("garbage", nil, "--result-ttl", "1h")
        local e = env:push("err")
        local out = env:cli("wait", tostring(g), tostring(e))
        -- wait gives errors of failed jobs only; show says why no result
        assert.matches(("%d completed -\n"):format(g), out, 1, true)
        assert.matches("result not stored: result: cannot encode a function",
          env:job(g).last_error, 1, true)
        assert.matches(e .. " completed false\n", out, 1, true)  -- only the first value
        assert.equal(0, env:stats().dead)
        assert.equal(0, env:stop())
      end)

      it("fails a job whose handler calls os.exit, and keeps running the next ones", function()
        env:config("concurrency = 1")
        env:script("quit", "return { max_retries = 0, handle = function() os.exit(3) end }")
        env:script("ok", RECORD .. "return function(job) record('ok', job.id) end")
        env:start()
        local q = env:push("quit")
        local row = wait_state(env, q, "dead")
        assert.equal(1, row.attempts)
        assert.matches("exit", row.last_error)
        assert.matches("3", row.last_error, 1, true)
        local a = env:push("ok")
        local b = env:push("ok")
        jr.wait_for(function() return env:count() == 1 end)
        assert.same({ tostring(a), tostring(b) }, lines(env.dir .. "/ok"))
        assert.is_true(env:alive())
        assert.equal(0, env:stop())
      end)

      it("times out a handler stuck in a pure Lua loop", function()
        env:script("spin", "return { timeout = 1, max_retries = 0, handle = function() while true do end end }")
        env:script("ok", "return function() end")
        env:start()
        local id = env:push("spin")
        local row = wait_state(env, id, "dead", 30)
        assert.equal(1, row.attempts)
        assert.matches("timed out after 1s", row.last_error, 1, true)
        env:push("ok")
        jr.wait_for(function() return env:count() == 1 end)
        assert.equal(0, env:stats().running)
        assert.equal(0, env:stop())
      end)

      it("never writes payloads to the runner's log", function()
        env:config("concurrency = 2, log = { level = \"debug\" }")
        env:script("fail", [[
          local jobrunner = require "jobrunner"
          return { max_retries = 0, handle = function(job)
            jobrunner.log("info", "handling " .. job.id)
            error("failing on purpose")
          end }]])
        env:script("ok", "return function() end")
        env:start()
        local f = env:push("fail", '{"secret":"CANARY-8c1f3e"}')
        env:push("ok", '{"secret":"CANARY-8c1f3e"}')
        env:push("ok", '{"secret":"CANARY-8c1f3e"}', "--in", "100ms")
        wait_state(env, f, "dead")
        jr.wait_for(function() return env:count() == 1 end)
        assert.equal(0, env:stop())
        assert.matches("failing on purpose", env:log(), 1, true)
        assert.not_matches("CANARY", env:log(), 1, true)
        assert.not_matches("CANARY", env:output(), 1, true)
      end)
    end)

    describe("a killed worker", function()
      it("fails the job with the signal, counts the attempt, keeps the runner going", function()
        env:script("kill9", SELF_PID .. [[
          return { max_retries = 0, handle = function()
            os.execute("kill -9 " .. self_pid())
          end }]])
        env:script("ok", RECORD .. "return function(job) record('ok', job.id) end")
        env:start()
        local id = env:push("kill9")
        local row = wait_state(env, id, "dead")
        assert.equal(1, row.attempts)
        assert.matches("worker died (signal 9)", row.last_error, 1, true)
        local a = env:push("ok")
        jr.wait_for(function() return env:count() == 1 end)
        assert.same({ tostring(a) }, lines(env.dir .. "/ok"))
        assert.matches("signal 9", env:log(), 1, true)
        assert.equal(0, env:stop())
      end)

      -- A worker writes its results in batches while more jobs wait, so
      -- at its death results of jobs it had finished were not written
      -- yet, and the runner blamed the oldest job it had sent: a finished
      -- quick job went dead with "worker died", and the pill ran again
      -- unblamed. The shared page (worker.h) now gives the runner those
      -- results and the job in the handler.
      it("blames the job that killed its worker, not the finished ones before it", function()
        env:config("concurrency = 1")
        env:script("pill", SELF_PID .. RECORD .. [[
          return { max_retries = 0, handle = function(job)
            record("pill", job.id)
            os.execute("kill -9 " .. self_pid())
          end }]])
        env:script("quick", RECORD .. [[
          return { max_retries = 0, handle = function(job)
            record("quick", job.id)
          end }]])
        local quick, pills = {}, {}
        for round = 1, 4 do
          -- a burst of quick jobs, so that the worker is sent several at
          -- once, with a pill among them
          for i = 1, 150 do
            quick[#quick + 1] = env:push("quick", "{}")
            if i == 100 then pills[round] = env:push("pill", "{}") end
          end
        end
        env:start()
        for _, id in ipairs(pills) do
          local row = wait_state(env, id, "dead")
          assert.equal(1, row.attempts)
          assert.matches("worker died (signal 9)", row.last_error, 1, true)
        end
        jr.wait_for(function() return env:count() == #pills end, 60, "quick jobs done")
        assert.equal(#pills, env:count("dead"))
        -- each pill ran once, each quick job once
        local ran = lines(env.dir .. "/pill")
        table.sort(ran)
        local want = {}
        for i, id in ipairs(pills) do want[i] = tostring(id) end
        table.sort(want)
        assert.same(want, ran)
        assert.equal(#quick, #lines(env.dir .. "/quick"))
        assert.equal(0, env:stop())
      end)

      it("sends a poison pill to the dead queue after its retries, other jobs still run", function()
        env:script("pill", SELF_PID .. RECORD .. [[
          return { max_retries = 1, backoff = 0, handle = function(job)
            record("pill", job.attempt)
            os.execute("kill -9 " .. self_pid())
          end }]])
        env:script("ok", RECORD .. "return function(job) record('ok', job.id) end")
        env:start()
        local id = env:push("pill")
        local ids = {}
        for i = 1, 5 do ids[i] = tostring(env:push("ok")) end
        local row = wait_state(env, id, "dead")
        assert.equal(2, row.attempts)
        assert.matches("worker died (signal 9)", row.last_error, 1, true)
        assert.same({ "1", "2" }, lines(env.dir .. "/pill"))
        jr.wait_for(function() return env:count() == 1 end)
        local seen = lines(env.dir .. "/ok")
        table.sort(seen)
        table.sort(ids)
        assert.same(ids, seen)
        assert.is_true(env:alive())
        assert.equal(0, env:stop())
      end)
    end)
  end)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " a job name no handler takes:", function()
    local env = jr.test_env(backend)
    local H = require "jrhttp"

    it("push warns on stderr and still pushes", function()
      env:script("email.send", "return function() end")
      local out, err, code = env:cli("push", "emial.send")
      assert.equal(0, code, err)
      local id = tonumber(out:match("^(%d+)\n$"))
      assert.equal("queued", env:job(id).state)
      assert.matches("warning: job 'emial.send': no handler for it in", err, 1, true)
      -- a name with a handler: no warning
      out, err, code = env:cli("push", "email.send")
      assert.equal(0, code, err)
      assert.equal("", err)
      -- no scripts directory here (a producer elsewhere): no warning
      os.execute("rm -rf " .. jr.quote(env.dir .. "/scripts"))
      out, err, code = env:cli("push", "emial.send")
      assert.equal(0, code, err)
      assert.equal("", err)
    end)

    it("the runner logs each once with its count, and shows them in /metrics "
       .. "and /api/runner", function()
      env:script("email.send", "return function() end")
      for _ = 1, 3 do env:push("emial.send") end
      env:push("email.send")
      local base = H.start(env)
      jr.wait_for(function()
        return env:log():match("3 queued jobs named 'emial.send': no handler")
      end, 30, "the runner names the unhandled jobs")
      local code, text = H.req(base .. "/metrics", { token = true })
      assert.equal(200, code)
      assert.matches('jobrunner_unhandled_jobs{name="emial.send"} 3', text, 1, true)
      assert.not_matches('jobrunner_unhandled_jobs{name="email.send"}', text, 1, true)
      local body
      code, body = H.req(base .. "/api/runner", { token = true })
      assert.equal(200, code)
      assert.same({ { name = "emial.send", queued = 3 } }, cjson.decode(body).unhandled)
      -- a reload counts again: a new name is logged, the old one not again
      env:push("other.name", "{}", "--in", "1h")
      env:script("email.more", "return function() end")
      env:signal("HUP")
      jr.wait_for(function()
        return env:log():match("1 queued job named 'other.name': no handler")
      end, 30, "the new name logged after the reload")
      local n = 0
      for _ in env:log():gmatch("named 'emial.send'") do n = n + 1 end
      assert.equal(1, n)
      assert.equal(4, env:count())
      assert.equal(0, env:stop())
    end)
  end)
end
