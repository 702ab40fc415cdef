-- unique_spec: unique jobs (docs/schedules.md, "Unique jobs") on every backend and
-- from every producer: a push whose name and unique_key match a queued,
-- scheduled or running job returns that job's id and says it was a
-- duplicate; unique_for holds the key for a window after the push, even
-- after the job finished and was deleted; on_conflict = "replace"
-- debounces a queued job; 8 producer processes racing on one key make one
-- job; bad keys and windows are refused naming the option.
local cjson = require "cjson"
local jr = require "jr"
local client = require "jobrunner"

-- "ID OUTCOME" as the CLI prints it for a unique push.
-- A nil payload is left out.
local function cli_push(env, name, json, ...)
  local out, err, code
  if json then
    out, err, code = env:cli("push", name, json, ...)
  else
    out, err, code = env:cli("push", name, ...)
  end
  assert(code == 0, ("push failed (%s): %s%s"):format(tostring(code), out, err))
  local id, outcome = out:match("^(%d+) (%a+)\n$")
  assert(id, "unexpected push output: " .. out)
  return tonumber(id), outcome
end

local function payload(env, id)
  return cjson.decode(env:job(id).payload)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": unique jobs", function()
    local env = jr.test_env(backend)

    local function open()
      return assert(client.open(env.url, { schema = env.schema }))
    end

    it("a duplicate CLI push returns the queued job's id and says so; show prints the key", function()
      local id, outcome = cli_push(env, "u.mail", '{"n":1}', "--unique-key", "user:42")
      assert.equal("new", outcome)
      local id2, outcome2 = cli_push(env, "u.mail", '{"n":2}', "--unique-key", "user:42")
      assert.equal(id, id2)
      assert.equal("duplicate", outcome2)
      assert.same({ n = 1 }, payload(env, id))
      -- another key, or the same key on another name, is another job
      local other = cli_push(env, "u.mail", nil, "--unique-key", "user:43")
      local named = cli_push(env, "u.sms", nil, "--unique-key", "user:42")
      assert.are_not.equal(id, other)
      assert.are_not.equal(id, named)
      assert.equal(3, env:count())
      -- a push without a key prints its id alone, as before
      local plain = env:cli("push", "u.mail")
      assert.truthy(plain:match("^%d+\n$"))
      -- show prints the key
      local out, err, code = env:cli("show", tostring(id))
      assert.equal(0, code, err)
      assert.truthy(out:match("unique_key%s+user:42\n"), out)
      out = env:cli("show", tostring(id), "--json")
      assert.equal("user:42", cjson.decode(out).unique_key)
      out = env:cli("show", plain:match("%d+"))
      assert.truthy(out:match("unique_key%s+%-\n"), out)
    end)

    it("blocks while scheduled or running, and frees the key when the job ends", function()
      local q = open()
      local id = q:push("u.job", nil, { unique_key = "k", run_in = 3600 })
      assert.equal(id, (q:push("u.job", nil, { unique_key = "k" })))
      env:exec("UPDATE jobs SET state = 'running' WHERE id = " .. id)
      local again, dup = q:push("u.job", nil, { unique_key = "k" })
      assert.equal(id, again)
      assert.is_true(dup)
      -- finished (dead, completed, cancelled or deleted): the key is free
      env:exec("UPDATE jobs SET state = 'dead' WHERE id = " .. id)
      local new, dup2 = q:push("u.job", nil, { unique_key = "k" })
      assert.are_not.equal(id, new)
      assert.is_false(dup2)
      env:exec("DELETE FROM jobs WHERE id = " .. new)
      assert.is_false(select(2, q:push("u.job", nil, { unique_key = "k" })))
      q:close()
    end)

    it("unique_for holds the key after the job completed and was deleted", function()
      env:script("u.work", jr.RECORD .. [[
        return function(job) record("ran", tostring(job.id)) end
      ]])
      env:config("poll_interval = 0.1")
      env:start()
      local q = open()
      local id = cli_push(env, "u.work", nil, "--unique-key", "daily", "--unique-for", "1h")
      jr.wait_for(function() return env:count() == 0 end, 20, "job done")
      -- the row is gone; the key is still held for the hour
      local again, outcome = cli_push(env, "u.work", nil, "--unique-key", "daily")
      assert.equal(id, again)
      assert.equal("duplicate", outcome)
      assert.equal(0, env:count())
      assert.same({ tostring(id) }, jr.lines(env.dir .. "/ran"))
      -- a window ends (moved into the past here, rather than waited
      -- for): the key is free again
      local short = q:push("u.work2", nil, { unique_key = "w", unique_for = 3600, run_in = 3600 })
      env:exec("DELETE FROM jobs WHERE id = " .. short)
      assert.equal(short, (q:push("u.work2", nil, { unique_key = "w" })))
      env:exec("UPDATE unique_keys SET held_until = held_until - " ..
        (backend == "postgres" and "interval '2 hours'" or "7200"))
      assert.is_false(select(2, q:push("u.work2", nil, { unique_key = "w", run_in = 3600 })))
      assert.equal(1, #env:jobs("name = 'u.work2'"))
      q:close()
      env:stop()
    end)

    it("dead retry keeps a free key and never fails on a held one", function()
      local q = open()
      local a = q:push("u.dead", nil, { unique_key = "k" })
      env:exec("UPDATE jobs SET state = 'dead' WHERE id = " .. a)
      local b = q:push("u.dead", nil, { unique_key = "k" })
      env:exec("UPDATE jobs SET state = 'dead' WHERE id = " .. b)
      local c = q:push("u.dead", nil, { unique_key = "j" })
      env:exec("UPDATE jobs SET state = 'dead' WHERE id = " .. c)
      local held = q:push("u.dead", nil, { unique_key = "j" })
      local out, err, code = env:cli("dead", "retry", "--all")
      assert.equal(0, code, out .. err)
      assert.equal(4, env:count("queued"))
      -- the newest dead job of "k" holds it again; the others run plain
      local keys = {}
      for _, r in ipairs(env:query("SELECT id, unique_key FROM jobs ORDER BY id")) do
        keys[#keys + 1] = r.unique_key == cjson.null and "-" or r.unique_key
      end
      assert.same({ "-", "k", "-", "j" }, keys)
      assert.same({ b, true, "duplicate" }, { q:push("u.dead", nil, { unique_key = "k" }) })
      assert.equal(held, (q:push("u.dead", nil, { unique_key = "j" })))
      q:close()
    end)

    it("on_conflict replace debounces a queued job, never a running one", function()
      local q = open()
      local id = q:push("u.search", { q = "a" }, { unique_key = "box", run_in = 30 })
      local before = env:job(id).run_at
      local again, outcome = cli_push(env, "u.search", '{"q":"ab"}', "--unique-key", "box",
        "--in", "60s", "--on-conflict", "replace")
      assert.equal(id, again)
      assert.equal("replaced", outcome)
      assert.same({ q = "ab" }, payload(env, id))
      local row = env:job(id)
      assert.is_true(row.run_at > before + 20, "run_at moved to the last push's")
      assert.near(row.db_now + 60, row.run_at, 10)
      assert.equal(1, env:count())
      -- running: the push is a plain duplicate; the payload stays
      env:exec("UPDATE jobs SET state = 'running' WHERE id = " .. id)
      local r2, dup, o2 = q:push("u.search", { q = "abc" },
        { unique_key = "box", on_conflict = "replace" })
      assert.equal(id, r2)
      assert.is_true(dup)
      assert.equal("duplicate", o2)
      assert.same({ q = "ab" }, payload(env, id))
      q:close()
    end)

    it("8 producer processes pushing one key at once make exactly one job", function()
      local cmd = ("cd %s && %s -c %s push u.race"):format(jr.quote(env.dir),
        jr.quote(jr.bin), jr.quote(env.config_file))
      env:script("u.race", "return function() end")  -- no warning in the output
      jr.sh(cmd .. " --unique-key warmup")   -- the schema exists before the race
      for round = 1, 2 do
        local go = env.dir .. "/go" .. round
        local script = {}
        for i = 1, 8 do
          script[#script + 1] = ("(while [ ! -e %s ]; do sleep 0.01; done; %s '{\"p\":%d}'" ..
            " --unique-key key%d > %s/out%d.%d 2>&1) &"):format(jr.quote(go), cmd, i,
            round, jr.quote(env.dir), round, i)
        end
        script[#script + 1] = "sleep 0.3; touch " .. jr.quote(go) .. "; wait"
        jr.sh(table.concat(script, "\n"))
        local ids, new = {}, 0
        for i = 1, 8 do
          local out = jr.read_file(("%s/out%d.%d"):format(env.dir, round, i)) or ""
          local id, outcome = out:match("^(%d+) (%a+)\n$")
          assert(id, "producer " .. i .. " printed: " .. out)
          ids[id] = true
          if outcome == "new" then new = new + 1 end
        end
        assert.equal(1, new)
        assert.equal(1, #(function() local t = {} for k in pairs(ids) do t[#t + 1] = k end return t end)())
        assert.equal(1, #env:jobs("unique_key = 'key" .. round .. "'"))
      end
    end)

    it("the Lua module returns duplicate as a second value, in push and push_many", function()
      local q = open()
      local id, dup, what = q:push("u.lua", { n = 1 }, { unique_key = "a" })
      assert.is_false(dup)
      assert.equal("new", what)
      local id2, dup2, what2 = q:push("u.lua", { n = 2 }, { unique_key = "a" })
      assert.equal(id, id2)
      assert.is_true(dup2)
      assert.equal("duplicate", what2)
      local _, dup3, what3 = q:push("u.lua", { n = 3 },
        { unique_key = "a", on_conflict = "replace", run_in = 5 })
      assert.is_true(dup3)
      assert.equal("replaced", what3)
      assert.same({ n = 3 }, payload(env, id))
      -- in one batch, a later job sees the earlier one
      local ids, dups = q:push_many({
        { "u.lua", { n = 4 }, { unique_key = "b", unique_for = 3600 } },
        { "u.lua", { n = 5 }, { unique_key = "b" } },
        { "u.lua", { n = 6 } },
        { "u.lua", { n = 7 }, { unique_key = "a" } },
      })
      assert.equal(ids[1], ids[2])
      assert.equal(id, ids[4])
      assert.same({ false, true, false, true }, dups)
      assert.equal(3, env:count())
      assert.equal("a", assert(q:show(id)).unique_key)
      assert.is_nil(assert(q:show(ids[3])).unique_key)
      q:close()
    end)

    it("a duplicate handler push fails neither the batch nor the job; a bad one fails its job", function()
      env:script("u.parent", [[
        local jobrunner = require "jobrunner"
        return function(job)
          jobrunner.push("u.child", { from = job.id }, { unique_key = "c" })
          jobrunner.push("u.child", { from = job.id, second = true }, { unique_key = "c" })
          jobrunner.push("u.other", { from = job.id })
        end
      ]])
      env:script("u.pbad", [[
        local jobrunner = require "jobrunner"
        return function(job)
          jobrunner.push("u.child", nil, { unique_key = "k", unique_for = -3 })
        end
      ]])
      env:config("poll_interval = 0.1, defaults = { max_retries = 0 }")
      local held = cli_push(env, "u.child", '{"first":true}', "--unique-key", "c")
      local p1 = env:push("u.parent")
      local p2 = env:push("u.parent")
      local bad = env:push("u.pbad")
      env:start()
      local row = env:wait_state(bad, "dead")
      assert.truthy(row.last_error:find("unique_for -3 is not a duration", 1, true),
        row.last_error)
      jr.wait_for(function() return #env:jobs("name = 'u.other'") == 2 end, 20,
        "both parents succeed")
      assert.equal(0, #env:jobs("name = 'u.parent'"))
      local children = env:jobs("name = 'u.child'")
      assert.equal(1, #children)
      assert.equal(held, children[1].id)
      assert.same({ first = true }, cjson.decode(children[1].payload))
      assert.is_nil(env:job(p1))
      assert.is_nil(env:job(p2))
      env:stop()
    end)

    describe("bad input names the option", function()
      it("from the CLI", function()
        local long = ("k"):rep(256)
        local cases = {
          { { "--unique-key", long }, "unique_key of 256 bytes is over the limit of 255" },
          { { "--unique-key", "" }, "unique_key is empty" },
          { { "--unique-key", "k", "--unique-for", "-5s" }, "invalid --unique-for '-5s'" },
          { { "--unique-key", "k", "--unique-for", "inf" }, "invalid --unique-for 'inf'" },
          { { "--unique-key", "k", "--on-conflict", "merge" }, "invalid --on-conflict 'merge'" },
          { { "--unique-for", "1h" }, "unique_for needs a unique_key" },
          { { "--on-conflict", "replace" }, "on_conflict needs a unique_key" },
        }
        for _, c in ipairs(cases) do
          local out, err, code = env:cli("push", "u.bad", table.unpack(c[1]))
          assert.equal(2, code, out .. err)
          assert.truthy(err:find(c[2], 1, true), err)
        end
        -- 255 bytes is the limit, not over it
        assert.equal("new", select(2, cli_push(env, "u.bad", nil, "--unique-key", ("k"):rep(255))))
        assert.equal(1, env:count())
      end)

      it("from the Lua module", function()
        local q = open()
        local cases = {
          { { unique_key = ("x"):rep(256) }, "unique_key of 256 bytes is over the limit of 255" },
          { { unique_key = "a\0b" }, "unique_key holds a NUL byte" },
          { { unique_key = "" }, "unique_key is empty" },
          { { unique_key = "k", unique_for = -1 }, "unique_for -1 is not a duration" },
          { { unique_key = "k", unique_for = 1 / 0 }, "unique_for inf is not a duration" },
          { { unique_key = "k", unique_for = 0 / 0 }, "is not a duration" },
          { { unique_for = 10 }, "unique_for needs a unique_key" },
        }
        for _, c in ipairs(cases) do
          local id, msg = q:push("u.bad", nil, c[1])
          assert.is_nil(id)
          assert.truthy(msg:find(c[2], 1, true), msg)
        end
        local ok, e = pcall(q.push, q, "u.bad", nil, { on_conflict = "merge" })
        assert.is_false(ok)
        assert.truthy(tostring(e):find("push: option 'on_conflict' must be \"keep\", " ..
          "\"replace\" or \"cancel_running\", got merge", 1, true), e)
        ok, e = pcall(q.push, q, "u.bad", nil, { unique_key = 42 })
        assert.is_false(ok)
        assert.truthy(tostring(e):find("push: option 'unique_key' must be a string, got number",
          1, true), e)
        local none, msg = q:push_many({ { "u.bad", nil, { unique_key = "" } } })
        assert.is_nil(none)
        assert.truthy(msg:find("job 1 of 1: job 'u.bad': unique_key is empty", 1, true), msg)
        assert.equal(0, env:count())
        q:close()
      end)
    end)

    if backend == "postgres" then
      it("the SQL function push takes unique_key, unique_for, on_conflict", function()
        env:cli("migrate")
        local s = '"' .. env.schema .. '"'
        local a = env:query(("SELECT %s.push('u.sql', '{\"n\":1}', unique_key => 'k') AS id")
          :format(s))[1].id
        local b = env:query(("SELECT %s.push('u.sql', '{\"n\":2}', unique_key => 'k') AS id")
          :format(s))[1].id
        assert.equal(a, b)
        local r = env:query(("SELECT * FROM %s.push_unique('u.sql', '{\"n\":3}', unique_key => 'k'," ..
          " on_conflict => 'replace')"):format(s))[1]
        assert.same({ id = a, outcome = "replaced" }, r)
        assert.same({ n = 3 }, payload(env, a))
        r = env:query(("SELECT * FROM %s.push_unique('u.sql', unique_key => 'w'," ..
          " unique_for => interval '1 hour')"):format(s))[1]
        assert.equal("new", r.outcome)
        env:exec("DELETE FROM jobs WHERE id = " .. r.id)
        assert.same({ id = r.id, outcome = "duplicate" }, env:query(("SELECT * FROM " ..
          "%s.push_unique('u.sql', unique_key => 'w')"):format(s))[1])
        -- the calls of the earlier schema still work
        local old = env:query(("SELECT %s.push('u.sql', '{}', now(), 0, 'default', 3) AS id")
          :format(s))[1].id
        assert.are_not.equal(a, old)
        assert.has_error(function()
          env:query(("SELECT %s.push('u.sql', unique_key => 'k', unique_for => interval '-1 s')")
            :format(s))
        end)
      end)
    end

    -- Races between two sessions, made to happen the same way every time:
    -- a second session (pghold) holds a lock until the first waits on it.
    if backend == "postgres" then
      local pghold = require "pghold"

      it("keeps a unique_for window when the holder finishes while the push waits on it", function()
        local q = open()
        local holder = q:push("u.win", nil, { unique_key = "daily" })
        -- the push finds the queued holder, gives back the window it took
        -- and waits on the holder's row; the holder finishes meanwhile
        local h = pghold.start(env, { "SELECT id FROM jobs WHERE id = " .. holder .. " FOR UPDATE" },
          { "DELETE FROM jobs WHERE id = " .. holder })
        local id, outcome = cli_push(env, "u.win", nil, "--unique-key", "daily", "--unique-for", "1h")
        local code, err = pghold.finish(h)
        assert.equal(0, code, err)
        assert.equal("new", outcome)
        assert.are_not.equal(holder, id)
        -- the window is held: a push inside it is a duplicate of the job,
        -- even once that job is gone
        assert.equal(1, #env:query("SELECT 1 FROM unique_keys WHERE unique_key = 'daily'"))
        env:exec("DELETE FROM jobs WHERE id = " .. id)
        assert.same({ id, "duplicate" }, { cli_push(env, "u.win", nil, "--unique-key", "daily") })
        q:close()
      end)

      it("dead retry of a key a push takes meanwhile runs the job plain, never fails", function()
        local q = open()
        local dead = q:push("u.race", nil, { unique_key = "k" })
        env:exec("UPDATE jobs SET state = 'dead' WHERE id = " .. dead)
        -- the push is in flight (not committed) when the retry reads the
        -- key's holders, and commits while the retry waits on it
        local h = pghold.start(env, { ("SELECT push('u.race', unique_key => 'k')") })
        local out, err, code = env:cli("dead", "retry", tostring(dead))
        local hcode, herr = pghold.finish(h)
        assert.equal(0, hcode, herr)
        assert.equal(0, code, out .. err)
        local row = env:query("SELECT state, unique_key FROM jobs WHERE id = " .. dead)[1]
        assert.same({ state = "queued", unique_key = cjson.null }, row)
        local pushed = env:query("SELECT id FROM jobs WHERE unique_key = 'k'")
        assert.equal(1, #pushed)
        assert.equal(pushed[1].id, (q:push("u.race", nil, { unique_key = "k" })))
        q:close()
      end)
    end
  end)
end
