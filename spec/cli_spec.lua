-- cli_spec.lua - the command line on each backend: help, version, push and
-- its options as stored rows, stats, the dead queue (list, retry, purge),
-- check, migrate, file modes (SQLite) and masked passwords (PostgreSQL).
local jr = require "jr"
local cjson = require "cjson"

local q = jr.quote

-- Runs the binary with no -c (for --help, --version, --backend).
local function bare(dir, ...)
  local args = { "cd", q(dir), "&&", q(jr.bin) }
  for _, a in ipairs({ ... }) do args[#args + 1] = q(a) end
  return jr.sh(table.concat(args, " "))
end

local function wait_state(env, ...) return env:wait_state(...) end

local function is_null(v) return v == nil or v == cjson.null end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " cli:", function()
    local env = jr.test_env(backend, { config = "concurrency = 2" })

    it("--help lists the commands, the options and the exit statuses", function()
      for _, flag in ipairs({ "--help", "-h" }) do
        local out, err, code = bare(env.dir, flag)
        assert.equal(0, code, err)
        for _, cmd in ipairs({ "run", "push", "stats", "dead", "retry", "purge",
                               "check", "migrate", "--version", "--backend",
                               "--scripts", "-c" }) do
          assert.matches(cmd, out, 1, true)
        end
        local statuses = out:match("exit status.*$")
        assert.is_string(statuses, "no exit status section")
        for s = 0, 3 do assert.matches("%f[%d]" .. s .. "%f[%D]", statuses) end
      end
    end)

    -- Every command and subcommand, as --help lists them.
    local COMMANDS = {
      { "run" }, { "push" }, { "push", "a" }, { "stats" }, { "dead" },
      { "dead", "list" }, { "dead", "retry" }, { "dead", "retry", "1" },
      { "dead", "purge" }, { "queue" }, { "queue", "list" },
      { "queue", "pause" }, { "queue", "pause", "q" }, { "queue", "resume" },
      { "cancel" }, { "cancel", "1" }, { "show" }, { "show", "1" }, { "list" },
      { "rerun" }, { "rerun", "1" }, { "rerun", "1", "--from-step", "a" },
      { "limits" }, { "check" }, { "migrate" }, { "reload" }, { "schedules" },
      { "batch" }, { "batch", "show" }, { "cancel", "--batch" },
      { "wait" }, { "wait", "1" }, { "signal" }, { "signal", "1", "go" },
      { "schedule" }, { "schedule", "pause" }, { "schedule", "pause", "s" },
      { "schedule", "fire", "s" },
      { "sequences" }, { "sequences", "skip" }, { "sequences", "skip", "k" },
      { "fair" }, { "fair", "set" }, { "fair", "set", "q", "k" },
      { "keys" }, { "keys", "new" }, { "keys", "status" }, { "keys", "rotate" },
    }

    -- No database: no SQLite file, no PostgreSQL schema.
    local function no_database()
      if backend == "sqlite" then
        assert.is_nil(jr.read_file(env:sqlite_path()), "database created")
      else
        local n = jr.sh(("psql -X -q -A -t %s -c %s"):format(q(jr.pg_url),
          q(("SELECT count(*) FROM pg_namespace WHERE nspname = '%s'"):format(env.schema))))
        assert.equal("0", (n:gsub("%s", "")), "schema created")
      end
    end

    it("-h and --help after any command print its usage and do nothing else", function()
      local listed = bare(env.dir, "--help"):match("commands:(.-)\noptions:")
      for name in listed:gmatch("\n  (%l+) ") do
        local found = false
        for _, c in ipairs(COMMANDS) do found = found or c[1] == name end
        assert.is_true(found, "command " .. name .. " not covered")
      end
      for _, cmd in ipairs(COMMANDS) do
        for _, flag in ipairs({ "-h", "--help" }) do
          local args = { table.unpack(cmd) }
          args[#args + 1] = flag
          local what = table.concat(args, " ")
          local out, err, code = env:cli(table.unpack(args))
          assert.equal(0, code, what .. ": " .. err)
          assert.equal("", err, what)
          assert.matches("^usage: jobrunner %[common options%] " .. cmd[1] .. " ", out)
          -- before the other arguments too
          table.insert(args, 2, table.remove(args))
          local out2, err2, code2 = env:cli(table.unpack(args))
          assert.equal(0, code2, table.concat(args, " ") .. ": " .. err2)
          assert.equal(out, out2)
        end
      end
      no_database()
    end)

    it("takes a name starting with '-' only after '--'", function()
      local _, err, code = env:cli("push", "-x")
      assert.equal(2, code)
      assert.matches("unknown option '-x'", err, 1, true)
      assert.matches("after '--'", err, 1, true)
      _, err, code = env:cli("queue", "pause", "-x")
      assert.equal(2, code)
      assert.matches("unknown option '-x'", err, 1, true)
      no_database()
      local out
      out, err, code = env:cli("push", "--", "-h")
      assert.equal(0, code, err)
      local id = tonumber(out:match("^(%d+)\n$"))
      assert.equal("-h", env:job(id).name)
      out, err, code = env:cli("push", "--queue", "q", "--", "--help", '{"n":2}')
      assert.equal(0, code, err)
      local row = env:job(tonumber(out:match("%d+")))
      assert.equal("--help", row.name)
      assert.equal("q", row.queue)
      assert.same({ n = 2 }, cjson.decode(row.payload))
      out, err, code = env:cli("queue", "pause", "--", "--help")
      assert.equal(0, code, err)
      local list = cjson.decode((env:cli("queue", "list", "--json")))
      local paused = {}
      for _, l in ipairs(list) do paused[l.name] = l.paused end
      assert.is_true(paused["--help"])
      -- a command that takes no names says so
      _, err, code = env:cli("stats", "--", "x")
      assert.equal(2, code)
      assert.matches("stats takes no names", err, 1, true)
    end)

    it("refuses an option given twice, naming it", function()
      local cases = {
        { "push", "a", "--unique-key", "k1", "--unique-key", "k2" },
        { "push", "a", "--queue", "q1", "--queue", "q2" },
        { "push", "a", "--priority", "1", "--priority", "2" },
        { "push", "a", "--in", "1h", "--in", "2h" },
        { "push", "a", "--max-retries", "1", "--max-retries", "2" },
        { "push", "a", "--key", "k", "--key", "k" },
        { "list", "--state", "dead", "--state", "queued" },
        { "list", "--limit", "1", "--limit", "2" },
        { "run", "--queues", "a", "--queues", "b" },
        { "run", "--http", "127.0.0.1:1", "--http", "127.0.0.1:2" },
        { "--scripts", "s1", "--scripts", "s2", "stats" },
        { "--backend", "sqlite:x.db", "--backend", "sqlite:y.db", "stats" },
      }
      for _, c in ipairs(cases) do
        local what = table.concat(c, " ")
        local out, err, code = env:cli(table.unpack(c))
        assert.equal(2, code, what)
        assert.equal("", out, what)
        local opt = c[1] == "--scripts" and c[1] or c[1] == "--backend" and c[1]
          or c[#c - 1]
        assert.matches("option '" .. opt .. "' given twice", err, 1, true)
      end
      no_database()
      -- dead reads its options on a database
      assert.equal(0, select(3, env:cli("migrate")))
      local out, err, code = env:cli("dead", "list", "--limit", "1", "--limit", "2")
      assert.equal(2, code)
      assert.equal("", out)
      assert.matches("option '--limit' given twice", err, 1, true)
      out, err, code = env:cli("dead", "purge", "--older-than", "1h", "--older-than", "2h")
      assert.equal(2, code)
      assert.equal("", out)
      assert.matches("option '--older-than' given twice", err, 1, true)
    end)

    it("takes a sqlite: URL whose path has an '=' as SQLite's", function()
      local path = env.dir .. "/a=b.db"
      local out, err, code = jr.sh(("%s --backend %s push x '{}'")
        :format(jr.quote(jr.bin), jr.quote("sqlite:" .. path)))
      assert.equal(0, code, out .. err)
      assert.is_not_nil(io.open(path))
      assert.is_nil(err:find("PostgreSQL", 1, true), err)
    end)

    it("dead list --limit N lists N dead jobs, 0 all of them", function()
      assert.equal(0, select(3, env:cli("migrate")))
      for _ = 1, 3 do env:push("x", "{}") end
      local past = jr.past_later(env)
      env:exec(("UPDATE jobs SET state = 'dead', died_at = %s, finished_at = %s")
        :format(past, past))
      local out, err, code = env:cli("dead", "list", "--json", "--limit", "0")
      assert.equal(0, code, err)
      assert.equal(3, #cjson.decode(out))
      out, err, code = env:cli("dead", "list", "--json", "--limit", "2")
      assert.equal(0, code, err)
      assert.equal(2, #cjson.decode(out))
      _, err, code = env:cli("dead", "list", "--limit", "-1")
      assert.equal(2, code)
      assert.matches("from 0 to", err, 1, true)
    end)

    it("--version prints the version", function()
      local out, err, code = bare(env.dir, "--version")
      assert.equal(0, code, err)
      assert.matches("^jobrunner %d+%.%d+%.%d+", out)
    end)

    it("refuses an unknown command with exit status 2, naming it", function()
      local out, err, code = env:cli("frobnicate")
      assert.equal(2, code)
      assert.matches("frobnicate", err, 1, true)
      assert.matches("--help", err, 1, true)
      assert.equal("", out)
    end)

    it("push prints the new job's id, increasing", function()
      local out1, err, code = env:cli("push", "a", '{"x":1}')
      assert.equal(0, code, err)
      assert.matches("^%d+\n$", out1)
      local out2 = env:cli("push", "a")
      local id1, id2 = tonumber(out1), tonumber(out2)
      assert.is_true(id2 > id1)
      local row = env:job(id1)
      assert.equal("a", row.name)
      assert.equal("queued", row.state)
      assert.equal(0, row.attempts)
      assert.same({ x = 1 }, cjson.decode(row.payload))
      -- no JSON given: an empty object
      assert.same({}, cjson.decode(env:job(id2).payload))
    end)

    it("stores --in, --at, --priority, --queue and --max-retries", function()
      local id = env:push("a", "{}", "--in", "1h", "--priority", "-5",
                          "--queue", "mail", "--max-retries", "7")
      local row = env:job(id)
      assert.is_true(math.abs(row.run_at - row.db_now - 3600) < 120,
                     "run_at not an hour ahead")
      assert.equal(-5, row.priority)
      assert.equal("mail", row.queue)
      assert.equal(7, row.max_retries)
      assert.equal("queued", row.state)
      -- --at as an epoch and as a UTC time
      row = env:job(env:push("a", "{}", "--at", "@2000000000"))
      assert.is_true(math.abs(row.run_at - 2000000000) < 1)
      row = env:job(env:push("a", "{}", "--at", "2033-05-18T03:33:20Z"))
      assert.is_true(math.abs(row.run_at - 2000000000) < 1)
      -- other durations
      row = env:job(env:push("a", "{}", "--in", "250ms"))
      assert.is_true(row.run_at - row.db_now < 60)
      row = env:job(env:push("a", "{}", "--in", "2d"))
      assert.is_true(math.abs(row.run_at - row.db_now - 2 * 86400) < 120)
      -- defaults
      row = env:job(env:push("a"))
      assert.equal(0, row.priority)
      assert.equal("default", row.queue)
      assert.is_true(row.run_at - row.db_now < 5)
    end)

    describe("stats", function()
      it("counts queued, scheduled, running, dead, per name, and unhandled", function()
        env:script("f", "return { max_retries = 0, handle = function() error('bad') end }")
        env:script("hold", [[
          return function()
            while not io.open(os.getenv("PWD") .. "/release") do
              os.execute("sleep 0.05")
            end
          end]])
        env:start()
        local dead = env:push("f")
        wait_state(env, dead, "dead")
        local held = env:push("hold")
        wait_state(env, held, "running")
        env:push("zz")
        env:push("zz", "{}", "--in", "1h")
        env:push("f", "{}", "--in", "1h")

        local s = env:stats()
        assert.equal(3, s.queued)
        assert.equal(2, s.scheduled)
        assert.equal(1, s.running)
        assert.equal(1, s.dead)
        assert.same({ "zz" }, s.unhandled)
        assert.equal(1, s.names.zz.ready)
        assert.equal(1, s.names.zz.scheduled)
        assert.equal(1, s.names.f.dead)
        assert.equal(1, s.names.f.scheduled)
        assert.equal(1, s.names.hold.running)

        local out, err, code = env:cli("stats")
        assert.equal(0, code, err)
        assert.matches("queued 3", out, 1, true)
        assert.matches("scheduled 2", out, 1, true)
        assert.matches("running 1", out, 1, true)
        assert.matches("dead 1", out, 1, true)
        assert.matches("\nzz +1 +1 +0 +0", out)
        assert.matches("\nf +0 +1 +0 +1", out)
        assert.matches("\nhold +0 +0 +1 +0", out)
        assert.matches("zz[^\n]*no handler", out)
        assert.not_matches("\nf [^\n]*no handler", out)

        jr.write_file(env.dir .. "/release", "")
        jr.wait_for(function() return env:stats().running == 0 end)
        assert.equal(0, env:stop())
      end)

      it("on an empty queue prints zeros", function()
        -- a reader creates no database: make an empty one first
        assert.equal(0, select(3, env:cli("migrate")))
        local s = env:stats()
        assert.equal(0, s.queued)
        assert.equal(0, s.scheduled)
        assert.equal(0, s.running)
        assert.equal(0, s.dead)
        assert.same({}, s.unhandled)
      end)
    end)

    describe("the dead queue", function()
      -- Makes n dead jobs named "f" with last error "bad N"; returns ids.
      local function make_dead(n)
        env:script("f", [[
          return { max_retries = 0,
                   handle = function(job) error(("bad %d"):format(job.payload.n), 0) end }]])
        env:start()
        local ids = {}
        for i = 1, n do ids[i] = env:push("f", ('{"n":%d}'):format(i)) end
        for _, id in ipairs(ids) do wait_state(env, id, "dead") end
        assert.equal(0, env:stop())
        return ids
      end

      it("dead list shows id, name, attempts, last error and time of death", function()
        local ids = make_dead(2)
        local keep = env:push("other")
        local out, err, code = env:cli("dead", "list")
        assert.equal(0, code, err)
        for i, id in ipairs(ids) do
          assert.matches("\n" .. id .. " +f +1 +%d%d%d%d%-%d%d%-%d%dT[^\n]* bad " .. i, out)
        end
        assert.not_matches("\n" .. keep .. " ", out)
        -- "dead" alone is "dead list"
        assert.equal(out, (env:cli("dead")))

        local list = cjson.decode((env:cli("dead", "list", "--json")))
        assert.equal(2, #list)
        table.sort(list, function(a, b) return a.id < b.id end)
        for i, d in ipairs(list) do
          assert.equal(ids[i], d.id)
          assert.equal("f", d.name)
          assert.equal(1, d.attempts)
          assert.matches("^bad " .. i .. "%f[%D]", d.last_error)
          assert.matches("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d", d.died_at)
        end
      end)

      it("dead list --json on an empty queue is an empty array", function()
        -- a reader creates no database: make an empty one first
        assert.equal(0, select(3, env:cli("migrate")))
        local out, err, code = env:cli("dead", "list", "--json")
        assert.equal(0, code, err)
        assert.same({}, cjson.decode(out))
        assert.matches("^%s*%[%s*%]%s*$", out)
      end)

      it("dead retry ID requeues that job to run now", function()
        local ids = make_dead(2)
        local out, err, code = env:cli("dead", "retry", tostring(ids[1]))
        assert.equal(0, code, err)
        assert.matches("1", out, 1, true)
        local row = env:job(ids[1])
        assert.equal("queued", row.state)
        assert.is_true(is_null(row.died_at))
        assert.is_true(row.run_at <= row.db_now + 1)
        assert.equal("dead", env:job(ids[2]).state)
        -- and it runs again
        env:script("f", [[return function(job)
          local f = assert(io.open(os.getenv("PWD") .. "/ran", "a"))
          f:write(job.id, "\n") f:close()
        end]])
        env:start()
        jr.wait_for(function() return env:count() == 1 end)
        assert.equal(ids[1] .. "\n", jr.read_file(env.dir .. "/ran"))
        assert.equal(0, env:stop())
      end)

      it("dead retry takes several ids", function()
        local ids = make_dead(3)
        local _, err, code = env:cli("dead", "retry", tostring(ids[1]), tostring(ids[3]))
        assert.equal(0, code, err)
        assert.equal("queued", env:job(ids[1]).state)
        assert.equal("dead", env:job(ids[2]).state)
        assert.equal("queued", env:job(ids[3]).state)
      end)

      it("dead retry --all requeues every dead job", function()
        local ids = make_dead(3)
        local out, err, code = env:cli("dead", "retry", "--all")
        assert.equal(0, code, err)
        assert.matches("3", out, 1, true)
        for _, id in ipairs(ids) do assert.equal("queued", env:job(id).state) end
        assert.equal(0, env:stats().dead)
      end)

      it("dead retry of a job that is not dead fails, naming the id", function()
        local ids = make_dead(1)
        local queued = env:push("other")
        local _, err, code = env:cli("dead", "retry", tostring(queued))
        assert.is_true(code ~= 0)
        assert.matches(tostring(queued), err, 1, true)
        assert.equal("queued", env:job(queued).state)
        _, err, code = env:cli("dead", "retry", "999999")
        assert.is_true(code ~= 0)
        assert.matches("999999", err, 1, true)
        -- a bad id is a bad command line
        _, _, code = env:cli("dead", "retry", "abc")
        assert.equal(2, code)
        -- nothing given at all
        _, _, code = env:cli("dead", "retry")
        assert.equal(2, code)
        assert.equal("dead", env:job(ids[1]).state)
      end)

      it("dead purge deletes every dead job and nothing else", function()
        make_dead(2)
        local keep = env:push("other")
        local out, err, code = env:cli("dead", "purge")
        assert.equal(0, code, err)
        assert.matches("2", out, 1, true)
        assert.equal(0, env:stats().dead)
        assert.equal(1, env:count())
        assert.equal("queued", env:job(keep).state)
      end)

      it("dead purge --older-than 1h keeps recent ones", function()
        local ids = make_dead(2)
        if backend == "postgres" then
          env:exec("UPDATE jobs SET died_at = died_at - interval '2 hours' WHERE id = " .. ids[1])
        else
          env:exec("UPDATE jobs SET died_at = died_at - 7200 WHERE id = " .. ids[1])
        end
        local out, err, code = env:cli("dead", "purge", "--older-than", "1h")
        assert.equal(0, code, err)
        assert.matches("1", out, 1, true)
        assert.is_nil(env:job(ids[1]))
        assert.equal("dead", env:job(ids[2]).state)
        _, err, code = env:cli("dead", "purge", "--older-than", "soon")
        assert.equal(2, code)
        assert.matches("soon", err, 1, true)
        assert.equal("dead", env:job(ids[2]).state)
      end)
    end)

    it("check passes with good handlers and fails listing every error", function()
      env:script("a", "return function() end")
      env:script("b.c", "return { handle = function() end, max_retries = 3 }")
      local out, err, code = env:cli("check")
      assert.equal(0, code, err)
      assert.matches("2 handlers loaded", out .. err, 1, true)
      local s1 = env:script("syn", "return function(\n")
      local s2 = env:script("num", "return 1")
      out, err, code = env:cli("check")
      assert.equal(3, code)
      assert.matches(s1 .. ":2:", out .. err, 1, true)
      assert.matches(s2, out .. err, 1, true)
      assert.matches("2 errors", out .. err, 1, true)
    end)

    it("migrate twice succeeds and keeps the jobs", function()
      local _, err, code = env:cli("migrate")
      assert.equal(0, code, err)
      local id = env:push("a", '{"k":"v"}')
      local out
      out, err, code = env:cli("migrate")
      assert.equal(0, code, err)
      assert.matches("up to date", out .. err, 1, true)
      assert.same({ k = "v" }, cjson.decode(env:job(id).payload))
    end)

    if backend == "sqlite" then
      it("creates the database files mode 0600 even under umask 000 #sqlite", function()
        local function mode(path)
          local out = jr.sh("stat -c %a " .. q(path))
          return out:match("%d+")
        end
        local _, err, code = jr.sh(("umask 000 && cd %s && %s -c %s migrate"):format(
          q(env.dir), q(jr.bin), q(env.config_file)))
        assert.equal(0, code, err)
        assert.equal("600", mode(env.dir .. "/jobs.db"))
        os.remove(env.dir .. "/jobs.db")
        -- the runner creates the database and its -wal and -shm files
        env:script("a", "return function() end")
        env:start("umask 000;")
        _, err, code = jr.sh(("umask 000 && cd %s && %s -c %s push a"):format(
          q(env.dir), q(jr.bin), q(env.config_file)))
        assert.equal(0, code, err)
        jr.wait_for(function() return env:count() == 0 end)
        for _, f in ipairs({ "jobs.db", "jobs.db-wal", "jobs.db-shm" }) do
          local m = mode(env.dir .. "/" .. f)
          assert.is_string(m, f .. " missing")
          assert.equal("600", m, f)
        end
        assert.equal(0, env:stop())
      end)
    end

    if backend == "postgres" then
      describe("a password in the backend URL #postgres", function()
        local canary = "canarypw123"
        local function config(url)
          -- wait_for_db = false: the runner exits instead of waiting for
          -- the server, so its one log line can be read
          jr.write_file(env.config_file, ("return { backend = %q, schema = %q, scripts = %q, wait_for_db = false }\n")
            :format(url, env.schema, env.dir .. "/scripts"))
        end
        local function hidden(text)
          assert.not_matches(canary, text, 1, true)
        end

        it("is masked in connection errors", function()
          config("postgresql://postgres:" .. canary .. "@/postgres?host=/nonexistent")
          for _, cmd in ipairs({ { "push", "a" }, { "stats" }, { "migrate" },
                                 { "dead", "list" } }) do
            local out, err, code = env:cli(table.unpack(cmd))
            assert.equal(1, code, cmd[1])
            assert.matches("user=postgres password=****", err, 1, true)
            hidden(out)
            hidden(err)
          end
          -- given with --backend as well
          local out, err, code = bare(env.dir, "--backend",
            "postgresql://postgres:" .. canary .. "@/postgres?host=/nonexistent", "stats")
          assert.equal(1, code)
          assert.matches("****", err, 1, true)
          hidden(out)
          hidden(err)
          -- the runner logs it masked and exits 1
          env:script("a", "return function() end")
          local p = env:start()
          assert.equal(1, env:stop("TERM", p))
          assert.matches("****", env:log(p), 1, true)
          hidden(env:log(p))
          hidden(env:output(p))
        end)

        it("is masked in the runner log when the connection works", function()
          -- the test cluster trusts its socket, so a password is ignored
          local url = jr.pg_url:gsub("^postgresql://", "postgresql://postgres:" .. canary .. "@")
          config(url)
          env:script("a", "return function() end")
          env:start()
          local id = env:push("a")
          jr.wait_for(function() return env:job(id) == nil end)
          assert.equal(0, env:stop())
          assert.matches("****", env:log(), 1, true)
          hidden(env:log())
          hidden(env:output())
        end)

        it("is masked when given as a password= parameter", function()
          config("postgresql:///postgres?host=/nonexistent&user=postgres&password=" .. canary)
          local out, err, code = env:cli("stats")
          assert.equal(1, code)
          hidden(out)
          hidden(err)
          assert.matches("****", err, 1, true)
        end)
      end)
    end
  end)
end
