-- push_validation_spec.lua - one set of rules for every push (CLI, Lua
-- client, handler pushes), a follow-up push the database refuses fails only
-- its own job, NUL bytes in names, real messages for out-of-range options,
-- impossible dates, and one max_retries rule for the lease rescue and the
-- config's backoff.
local h = require "jr"
local jr = require "jobrunner"

local RECORD = h.RECORD

for _, backend in ipairs(h.backends()) do
  describe(backend .. " push validation:", function()
    local env = h.test_env(backend)

    local function open()
      return assert(jr.open(env.url, { schema = env.schema }))
    end

    describe("a bad follow-up push", function()
      it("fails its own job with the reason, and the runner runs the next job",
        function()
        env:script("bad", [[
          local jobrunner = require "jobrunner"
          return { max_retries = 0, handle = function(job)
            jobrunner.push("ok", {}, { run_in = 0/0 })
          end }]])
        env:script("ok", "return function() end")
        env:start()
        local bad = env:push("bad")
        local row = env:wait_state(bad, "dead")
        assert.matches("run_in", row.last_error, 1, true)
        local ok = env:push("ok")
        h.wait_for(function() return env:job(ok) == nil end, 20, "next job done")
        assert.equal(0, env:count("queued"))
        assert.equal(0, env:stop())
      end)

      it("raises at once in the handler, so pcall sees the reason", function()
        env:script("probe", RECORD .. [[
          local jobrunner = require "jobrunner"
          return function(job)
            for _, o in ipairs({ { run_in = 0/0 }, { run_at = 1/0 },
                                 { run_in = -1/0 }, { run_at = -5 },
                                 { priority = math.maxinteger },
                                 { max_retries = -5 }, { max_retries = -1 } }) do
              local ok, e = pcall(jobrunner.push, "ok", {}, o)
              record("errors", tostring(ok) .. " " .. tostring(e))
            end
          end]])
        env:start()
        local id = env:push("probe")
        h.wait_for(function() return env:job(id) == nil end)
        local lines = h.lines(env.dir .. "/errors")
        assert.equal(7, #lines)
        for _, l in ipairs(lines) do
          assert.matches("^false .*jobrunner%.push", l)
        end
        assert.matches("run_in", lines[1], 1, true)
        assert.matches("run_at", lines[2], 1, true)
        assert.matches("priority", lines[5], 1, true)
        assert.matches("max_retries", lines[6], 1, true)
        assert.equal(0, env:count())   -- none of them was pushed
        assert.equal(0, env:stop())
      end)

      it("refused by the database for one result: that job fails, the others "
         .. "of the batch are recorded", function()
        -- a rule the runner cannot know: the database refuses the row
        env:start()
        env:stop()
        if backend == "sqlite" then
          env:exec([[CREATE TRIGGER refuse BEFORE INSERT ON jobs
                     WHEN NEW.name = 'refused'
                     BEGIN SELECT RAISE(ABORT, 'refused by trigger'); END;]])
        else
          env:exec([[CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
                     BEGIN
                       IF NEW.name = 'refused' THEN
                         RAISE EXCEPTION 'refused by trigger'
                           USING ERRCODE = 'check_violation';
                       END IF;
                       RETURN NEW;
                     END $$;
                     CREATE TRIGGER refuse BEFORE INSERT ON jobs
                       FOR EACH ROW EXECUTE FUNCTION refuse();]])
        end
        env:config("concurrency = 4")
        env:script("parent", [[
          local jobrunner = require "jobrunner"
          return { max_retries = 0, handle = function(job)
            jobrunner.push(job.payload.child, { from = job.id })
          end }]])
        env:script("child", "return function() end")
        local ids, bad = {}, nil
        for i = 1, 40 do
          ids[i] = env:push("parent", i == 20 and '{"child":"refused"}'
                                      or '{"child":"child"}')
        end
        bad = ids[20]
        env:start()
        local row = env:wait_state(bad, "dead")
        assert.matches("refused by trigger", row.last_error, 1, true)
        h.wait_for(function() return env:count() == 1 end, 30,
          "every other job and its child done")
        local ok = env:push("child")
        h.wait_for(function() return env:job(ok) == nil end)
        assert.equal(0, env:stop())
      end)
    end)

    describe("NUL bytes", function()
      it("are refused in names and queues by the Lua client", function()
        local q = open()
        local id, err = q:push("ab\0cd")
        assert.is_nil(id)
        assert.matches("invalid job name", err, 1, true)
        id, err = q:push("ok", {}, { queue = "q\0x" })
        assert.is_nil(id)
        assert.matches("invalid queue name", err, 1, true)
        id, err = q:push_many({ { "good" }, { "ab\0cd" } })
        assert.is_nil(id)
        assert.matches("invalid job name", err, 1, true)
        q:close()
        assert.equal(0, env:count())
      end)

      it("are refused in handler pushes", function()
        env:script("probe", RECORD .. [[
          local jobrunner = require "jobrunner"
          return function(job)
            record("errors", select(2, pcall(jobrunner.push, "ab\0cd")))
            record("errors", select(2, pcall(jobrunner.push, "ok", {},
                                             { queue = "q\0x" })))
          end]])
        env:start()
        local id = env:push("probe")
        h.wait_for(function() return env:job(id) == nil end)
        local lines = h.lines(env.dir .. "/errors")
        assert.matches("invalid job name", lines[1], 1, true)
        assert.matches("invalid queue name", lines[2], 1, true)
        assert.equal(0, env:count())
        assert.equal(0, env:stop())
      end)
    end)

    describe("the Lua client's options", function()
      it("say what is out of range", function()
        local q = open()
        local ok, err = pcall(q.push, q, "x", {}, { priority = math.maxinteger })
        assert.is_false(ok)
        assert.matches("option 'priority' is out of range", err, 1, true)
        assert.matches("9223372036854775807", err, 1, true)
        ok, err = pcall(q.push, q, "x", {}, { max_retries = -5 })
        assert.is_false(ok)
        assert.matches("option 'max_retries' is out of range: -5", err, 1, true)
        local id, msg = q:push("x", {}, { run_in = 0/0 })
        assert.is_nil(id)
        assert.matches("run_in", msg, 1, true)
        id, msg = q:push("x", {}, { run_at = 1/0 })
        assert.is_nil(id)
        assert.matches("run_at", msg, 1, true)
        q:close()
        assert.equal(0, env:count())
      end)
    end)

    describe("payload text", function()
      -- refused alike on both backends, with the same message
      local REFUSED = {
        { '{"s":"A\xffB"}', "byte 8: not valid UTF-8 (JSON text must be UTF-8)" },
        { '{"s":"\xc3"}', "byte 7: not valid UTF-8 (JSON text must be UTF-8)" },
        { '{"s":"a\\u0000b"}', "byte 8: \\u0000 in a string: no backend stores a NUL character" },
        { '["\\ud800"]', "byte 3: \\ud800: a high surrogate without a low one" },
        { '["\\udc00x"]', "byte 3: \\udc00: a low surrogate without a high one" },
        { ("["):rep(1001) .. ("]"):rep(1001), "byte 1001: nested deeper than 1000" },
        { '{"n":1e131072}', "byte 6: number out of range (at most 131072 digits " ..
                            "before the point and 16383 after)" },
      }

      it("the CLI refuses bytes that are not UTF-8, \\u0000 and lone surrogates",
        function()
        env:push("x")       -- creates the schema
        for _, c in ipairs(REFUSED) do
          local out, err, code = env:cli("push", "p", c[1])
          assert.equal(2, code, c[2])
          assert.equal("", out)
          assert.equal("jobrunner: job 'p': invalid JSON payload: " .. c[2] .. "\n", err)
        end
        assert.equal(1, env:count())
        -- what both store
        for _, ok in ipairs({ '["\\ud83d\\ude00"]', '{"s":"\\u0001 \xc3\xa9"}',
                              '[1e131071, 1e-16383]',
                              ("["):rep(1000) .. ("]"):rep(1000) }) do
          local out, err, code = env:cli("push", "p", ok)
          assert.equal(0, code, err)
          local payload = select(1, env:cli("show", out:match("%d+"), "--json"))
          assert.is_not_nil(utf8.len(payload))
        end
      end)

      it("the Lua client and handler pushes refuse a NUL byte in a string",
        function()
        local q = open()
        local id, err = q:push("p", { s = "a\0b" })
        assert.is_nil(id)
        assert.matches("payload.s: string holds a NUL byte", err, 1, true)
        id, err = q:push("p", { ["k\0"] = 1 })
        assert.is_nil(id)
        assert.matches("NUL byte", err, 1, true)
        q:close()
        env:script("probe", RECORD .. [[
          local jobrunner = require "jobrunner"
          return function(job)
            record("errors", select(2, pcall(jobrunner.push, "p", { s = "\0" })))
          end]])
        env:start()
        local probe = env:push("probe")
        h.wait_for(function() return env:job(probe) == nil end)
        assert.matches("payload.s: string holds a NUL byte",
                       h.lines(env.dir .. "/errors")[1], 1, true)
        assert.equal(0, env:count())
        assert.equal(0, env:stop())
      end)

      if backend == "sqlite" then
        it("show prints bytes a plain SQL insert stored as U+FFFD #sqlite", function()
          env:push("x")
          env:exec("INSERT INTO jobs (name, payload) VALUES ('raw', " ..
                   "CAST(X'7B2273223A2241FF42C3227D' AS TEXT))")
          local id = ("%d"):format(env:query("SELECT max(id) AS id FROM jobs")[1].id)
          local out, err, code = env:cli("show", tostring(id), "--json")
          assert.equal(0, code, err)
          assert.is_not_nil(utf8.len(out), "show --json printed invalid UTF-8")
          local job = require("cjson").decode(out)
          assert.equal("A\u{FFFD}B\u{FFFD}", job.payload.s)
          out = env:cli("show", tostring(id))
          assert.is_not_nil(utf8.len(out), "show printed invalid UTF-8")
          assert.matches('{"s":"A\\ufffdB\\ufffd"}', out, 1, true)
        end)
      end
    end)

    describe("push --at", function()
      it("refuses impossible dates and non-finite epochs", function()
        local _, err, code = env:cli("push", "x", "--at", "2024-02-29T12:00:00Z")
        assert.equal(0, code, err)
        for _, at in ipairs({ "2026-02-30T00:00:00Z", "2026-13-01", "2025-02-29",
                              "2026-04-31T10:00:00Z", "2026-01-01T24:00:00Z",
                              "@nan", "@inf" }) do
          _, err, code = env:cli("push", "x", "--at", at)
          assert.is_not.equal(0, code, at)
          assert.matches("--at", err, 1, true)
        end
        assert.equal(1, env:count())
      end)
    end)

    describe("max_retries", function()
      it("the lease rescue follows the handler's max_retries", function()
        env:config("lease = 1")
        env:script("slow", RECORD .. [[
          return { max_retries = 0, timeout = 120, handle = function(job)
            record("started", job.id)
            os.execute("sleep 60")
          end }]])
        local id = env:push("slow")
        env:start()
        h.wait_for(function() return #h.lines(env.dir .. "/started") == 1 end)
        env:stop("KILL")
        env:start()
        local row = env:wait_state(id, "dead", 30)
        assert.matches("lease expired", row.last_error, 1, true)
        assert.equal(1, row.attempts)
        assert.equal(1, #h.lines(env.dir .. "/started"))
        assert.equal(0, env:stop())
      end)

      it("a config backoff sees the max_retries in force", function()
        env:config(([[backoff = function(job, attempt, err)
            local f = io.open(%q, "a")
            f:write(tostring(job.max_retries), "\n")
            f:close()
            return 0
          end]]):format(env.dir .. "/seen"))
        env:script("fails", [[
          return { max_retries = 2, handle = function() error("no") end }]])
        local id = env:push("fails")
        env:start()
        env:wait_state(id, "dead")
        assert.same({ "2", "2" }, h.lines(env.dir .. "/seen"))
        assert.equal(0, env:stop())
      end)
    end)

    describe("plain SQL", function()
      it("refuses an infinite run_at like every producer", function()
        env:push("x")       -- creates the schema
        local _, err, code
        if backend == "sqlite" then
          _, err, code = h.sh(("sqlite3 -cmd '.timeout 10000' %s %s"):format(h.quote(env:sqlite_path()),
            h.quote("INSERT INTO jobs (name, run_at) VALUES ('never', 1e999)")))
        else
          _, err, code = h.sh(("psql -X -q -v ON_ERROR_STOP=1 %s -c %s"):format(
            h.quote(h.pg_url), h.quote(("SELECT %s.push('never', run_at => 'infinity')")
              :format(env.schema))))
        end
        assert.is_not.equal(0, code)
        assert.matches("run_at", err, 1, true)
        assert.equal(1, env:count())
      end)

      it("an upgrade from schema 1 keeps the jobs and runs them", function()
        -- a database made by the previous schema, with jobs in it
        local text = h.read_file(h.schema_file(backend))
        local v1 = assert(text:match("%-%- migration 1\n(.-)%-%- migration 2\n"))
        if backend == "sqlite" then
          env:exec(v1 .. "\nPRAGMA user_version = 1;" ..
            "INSERT INTO jobs (name, payload) VALUES ('old', '{\"n\":1}');" ..
            "INSERT INTO jobs (name, payload, max_retries) VALUES ('old', '{\"n\":2}', 3);")
        else
          local s = '"' .. env.schema .. '"'
          h.sh(("psql -X -q -v ON_ERROR_STOP=1 %s -c %s"):format(h.quote(h.pg_url),
            h.quote("CREATE SCHEMA " .. s .. "; CREATE TABLE " .. s ..
              ".migrations (version int PRIMARY KEY, applied_at timestamptz " ..
              "NOT NULL DEFAULT now()); " .. v1:gsub("{{schema}}", s) ..
              "; INSERT INTO " .. s .. ".migrations (version) VALUES (1);" ..
              "SELECT " .. s .. ".push('old', '{\"n\":1}');" ..
              "SELECT " .. s .. ".push('old', '{\"n\":2}', max_retries => 3);")))
        end
        assert.equal(2, env:count())
        local _, err, code = env:cli("migrate")
        assert.equal(0, code, err)
        -- brought to the latest version: the last "-- migration N" block
        local latest = 0
        for n in text:gmatch("%-%- migration (%d+)\n") do latest = tonumber(n) end
        assert.is_true(latest >= 2)
        if backend == "sqlite" then
          assert.equal(latest, env:query("PRAGMA user_version")[1].user_version)
        else
          assert.equal(latest, env:query("SELECT max(version) AS v FROM migrations")[1].v)
        end
        local rows = env:jobs()
        assert.equal(2, #rows)
        assert.equal("old", rows[1].name)
        assert.equal(3, rows[2].max_retries)
        env:script("old", h.RECORD .. [[
          return function(job) record("ran", job.payload.n) end]])
        env:start()
        h.wait_for(function() return env:count() == 0 end)
        local ran = h.lines(env.dir .. "/ran")
        table.sort(ran)
        assert.same({ "1", "2" }, ran)
        assert.equal(0, env:stop())
      end)
    end)
  end)
end
