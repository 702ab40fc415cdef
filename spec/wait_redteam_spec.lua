-- wait_redteam_spec.lua - `jobrunner wait` given what a careless user
-- or a plain SQL producer gives it: more ids than one wait takes (a clear
-- error naming the limit, not the C library's "ids, out and n"), a
-- --timeout without its value (said so, not "unknown option"), and on
-- SQLite a result a plain UPDATE stored with newlines or as text that is
-- not JSON (still one line per job, and --json lines that decode); the
-- Lua client's q:wait given 7.0 (job 7, as Lua's own functions take it)
-- or a fraction (said to be no integer job id, not "table expected");
-- on SQLite a database file put back under a wait (a backup restored) is
-- the one it reads from then on, and one deleted is a loss (exit 7): it
-- read the file it had opened before, and waited to its timeout.
local jr = require "jr"
local cjson = require "cjson"

local q = jr.quote

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " wait, red team:", function()
    local env = jr.test_env(backend)

    it("refuses more than 100000 ids with a message naming the limit", function()
      env:script("ok", "return function() return 1 end")
      local id = env:push("ok", "{}", "--result-ttl", "1h")
      -- the ids expand in the shell: one argument of the shell's own
      -- command line could not hold them all
      local base = ("cd %s && %s -c %s wait --timeout 1"):format(
        q(env.dir), q(jr.bin), q(env.config_file))
      local out, err, code = jr.sh(base .. (" $(yes %d | head -100001)"):format(id))
      assert.equal(2, code, out .. err)
      assert.equal("", out)
      assert.matches("wait: 100001 job ids given, at most 100000 in one wait", err, 1, true)
      -- 100000 are taken: the job has not run, each is printed as it stands
      out, err, code = jr.sh(base .. (" $(yes %d | head -100000)"):format(id))
      assert.equal(124, code, err)
      assert.equal((id .. " queued -\n"):rep(100000), out)
      assert.matches("timed out after 1s with 100000 jobs not ended", err, 1, true)
    end)

    it("says a --timeout at the end of the line lacks its duration", function()
      local out, err, code = env:cli("wait", "1", "--timeout")
      assert.equal(2, code, out .. err)
      assert.matches("wait: --timeout needs a duration", err, 1, true)
      assert.not_matches("unknown option", err)
    end)

    it("takes an id the Lua client's q:wait gets as a float with an integer value", function()
      env:script("ok", "return function() return 1 end")
      local id = env:push("ok", "{}", "--result-ttl", "1h")
      env:start()
      env:wait_state(id, "completed", 30)
      assert.equal(0, env:stop())
      local c = jr.client(env)
      -- 2^53 and a JSON decoder give floats: 7.0 is job 7
      local got = assert(c:wait(id + 0.0))
      assert.same({ id = id, state = "completed", result = 1, result_json = "1" }, got[1])
      got = assert(c:wait({ id + 0.0, id }))
      assert.equal(2, #got)
      -- a fraction, or what is no id at all, says what an id is
      local ok, e = pcall(c.wait, c, id + 0.5)
      assert.is_false(ok)
      assert.matches("not an integer job id", e, 1, true)
      ok, e = pcall(c.wait, c, tostring(id))
      assert.is_false(ok)
      assert.matches("job id or list of job ids expected, got string", e, 1, true)
      ok, e = pcall(c.wait, c, { id, id + 0.5 })
      assert.is_false(ok)
      assert.matches("wait: ids[2] is not an integer job id", e, 1, true)
      c:close()
    end)

    if backend == "sqlite" then
      local function wait_bg(...) return jr.wait_bg(env, ...) end

      -- the wait's connection, its pid's open file of the database
      local function wait_opened(path)
        local o = jr.sh(("for p in $(pgrep -f %s); do ls -l /proc/$p/fd; done 2>/dev/null")
          :format(q(env.config_file .. " wait")))
        return o:find(path, 1, true) ~= nil
      end

      it("sees the end of its job in a database file put back under it", function()
        env:script("ok", "return function() return 2 end")
        local id = env:push("ok", "{}", "--result-ttl", "1h")
        local path = env:sqlite_path()
        local read = wait_bg(tostring(id), "--timeout", "120")
        jr.wait_for(function() return wait_opened(path) end, 30, "the wait's connection")
        jr.sleep(1)           -- past its first read
        -- a backup restored: a copy put in its place with rename
        assert.equal(0, select(3, jr.sh(("cp %s %s.new && rm -f %s-wal %s-shm && mv %s.new %s")
          :format(q(path), q(path), q(path), q(path), q(path), q(path)))))
        env:start()
        local out, err, code = read()
        assert.equal(0, code, out .. err)
        assert.equal(id .. " completed 2\n", out)
        assert.equal(0, env:stop())
      end)

      it("gives up on a database file deleted under it: exit 7, not queued", function()
        env:script("ok", "return function() return 2 end")
        local id = env:push("ok", "{}", "--in", "1h")
        local path = env:sqlite_path()
        local read = wait_bg(tostring(id), "--timeout", "60")
        jr.wait_for(function() return wait_opened(path) end, 30, "the wait's connection")
        jr.sleep(1)
        assert.equal(0, select(3, jr.sh(("rm -f %s %s-wal %s-shm"):format(q(path), q(path), q(path)))))
        local out, err, code = read()
        assert.equal(7, code, out .. err)
        assert.equal("", out)
        assert.matches("the database file is gone", err, 1, true)
      end)

      it("keeps a result stored by plain SQL on one line, and --json valid", function()
        env:script("ok", "return function() return 1 end")
        local a = env:push("ok", "{}", "--result-ttl", "1h")
        local b = env:push("ok", "{}", "--result-ttl", "1h")
        env:start()
        env:wait_state(a, "completed", 30)
        env:wait_state(b, "completed", 30)
        assert.equal(0, env:stop())
        -- JSON laid out on lines, and text that is not JSON at all
        env:exec(("UPDATE jobs SET result = '{' || char(10) || '  \"a\": [1,' || char(13, 10)" ..
          " || char(9) || '2]' || char(10) || '}' WHERE id = %d"):format(a))
        env:exec(("UPDATE jobs SET result = 'not' || char(10) || 'json \"' WHERE id = %d")
          :format(b))
        local out, err, code = env:cli("wait", tostring(a), tostring(b))
        assert.equal(0, code, err)
        assert.equal(('%d completed {   "a": [1,   2] }\n%d completed "not\\njson \\""\n')
          :format(a, b), out)
        out, err, code = env:cli("wait", "--json", tostring(a), tostring(b))
        assert.equal(0, code, err)
        local l = {}
        for line in out:gmatch("([^\n]*)\n") do l[#l + 1] = cjson.decode(line) end
        assert.equal(2, #l, out)
        assert.same({ a = { 1, 2 } }, l[1].result)
        assert.equal('not\njson "', l[2].result)
      end)
    end
  end)
end
