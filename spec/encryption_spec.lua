-- encryption_spec.lua - encrypted payloads, results, step records and
-- signal payloads (docs/operations.md, "Encryption"), on each engine: the
-- raw columns (read with the sqlite3 shell and psql), the payload's stub
-- and its bytes among them, hold neither the text nor the exact length;
-- the handler sees the payload clear; show and an authorised GET
-- decrypt (a write token, a read token granted decrypt), another
-- read-only caller sees "<encrypted>"; the keys never reach a log,
-- /metrics or an error; a key file open to others, malformed or missing
-- is refused at start and at push; a key id the runner lacks fails the
-- job's attempt naming it; keys rotate while a runner drains and a
-- producer pushes loses nothing and keys status then says the old key
-- may go.
local jr = require "jr"
local http = require "jrhttp"
local cjson = require "cjson"

local function keys_of(path)
  local t = {}
  for id, b64 in (jr.read_file(path) or ""):gmatch("(%S+) (%S+)\n") do
    t[#t + 1] = { id = id, b64 = b64 }
  end
  return t
end

-- the raw text of a column of job id, as the engine's own client prints it
local function raw(env, id, col)
  local cast = env.backend == "postgres" and "::text" or ""
  local r = env:query(("SELECT %s%s AS v FROM jobs WHERE id = %d"):format(
    col, cast, id))[1]
  return r and r.v
end

local function no_key_in(text, keys, where)
  for _, k in ipairs(keys) do
    assert.is_nil(text:find(k.b64, 1, true), "a key's text in " .. where)
  end
end

local HANDLER = [[
  local jr = require "jobrunner"
  return function(job)
    local f = assert(io.open(os.getenv("PWD") .. "/seen", "a"))
    f:write(job.payload.secret, "\n")
    f:close()
    local s = jr.step("one", function() return { v = "step-" .. job.payload.secret } end)
    if job.payload.wait then
      local got = jr.wait_signal("go")
      return { r = "result-" .. got.answer, s = s.v }
    end
    return { r = "result-" .. job.payload.secret, s = s.v }
  end]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " encryption:", function()
    local env = jr.test_env(backend)

    local function keyfile(name)
      local path = env.dir .. "/" .. (name or "keys")
      local out, err, code = env:cli("keys", "new", path)
      assert.equal(0, code, err)
      assert.matches("added at the top", out)
      return path
    end

    it("stores values sealed, runs the job clear, shows them to whom may see", function()
      local kf = keyfile()
      local keys = keys_of(kf)
      assert.equal(1, #keys)
      assert.equal("-rw-------", (jr.sh("stat -c %A " .. jr.quote(kf))):match("%S+"))
      env:script("rec", HANDLER)
      local enc = ('encryption = { key_file = %q }, retention = { completed = "1h" }'):format(kf)
      env:config(enc)
      -- two lengths within one 32-byte block seal to one length
      local a = env:push("rec", '{"secret":"tiger-one"}')
      local b = env:push("rec", '{"secret":"tiger-two-longer-x"}')
      local w = env:push("rec", '{"secret":"tiger-wait","wait":true}')
      local pa, pb = raw(env, a, "payload"), raw(env, b, "payload")
      assert.is_nil(pa:find("tiger", 1, true))
      assert.matches('"$jr_enc"', pa, 1, true)
      assert.equal(#pa, #pb)
      -- stored as a stub and its bytes: the bytes neither hold the text
      -- nor tell the length beyond the block; read back, the envelope
      local hex = env.backend == "postgres" and "encode(sealed, 'hex')" or "hex(sealed)"
      local sa, sb = raw(env, a, "length(sealed)"), raw(env, b, "length(sealed)")
      assert.equal(12 + 32 + 16, tonumber(sa))
      assert.equal(tonumber(sa), tonumber(sb))
      for _, id in ipairs({ a, b }) do
        local bytes = raw(env, id, hex):gsub("%x%x", function(x)
          return string.char(tonumber(x, 16)) end)
        assert.is_nil(bytes:find("tiger", 1, true))
        assert.matches('^{"%$jr_enc":"v1:[%w._-]+:[A-Za-z0-9+/=]+"}$', jr.stored_payload(env, id))
      end
      local url = http.start(env, enc)
      env:wait_state(a, "completed", 30)
      env:wait_state(b, "completed", 30)
      env:wait_state(w, "waiting", 30)
      local out, err, code = env:cli("signal", tostring(w), "go", '{"answer":"tiger-answer"}')
      assert.equal(0, code, err .. out)
      env:wait_state(w, "completed", 30)
      -- the handler saw the clear payloads
      local seen = jr.read_file(env.dir .. "/seen")
      assert.matches("tiger-one", seen, 1, true)
      assert.matches("tiger-two-longer-x", seen, 1, true)
      -- results, steps and the signal's payload are sealed in the rows
      for _, id in ipairs({ a, b, w }) do
        for _, col in ipairs({ "payload", "result", "steps", "waits" }) do
          local v = raw(env, id, col)
          if v ~= nil and v ~= cjson.null then
            assert.is_nil(v:find("tiger", 1, true), col .. " of job " .. id .. ": " .. v)
          end
        end
        assert.matches('"$jr_enc"', raw(env, id, "result"), 1, true)
        assert.matches('"$jr_enc"', raw(env, id, "steps"), 1, true)
      end
      assert.matches('"$jr_enc"', raw(env, w, "waits"), 1, true)
      -- show decrypts (the CLI with the config's key file)
      out, err, code = env:cli("show", tostring(w), "--json")
      assert.equal(0, code, err)
      local j = cjson.decode(out)
      assert.equal("tiger-wait", j.payload.secret)
      assert.equal("result-tiger-answer", j.result.r)
      -- and so does wait, its result
      out, err, code = env:cli("wait", tostring(a), "--json")
      assert.equal(0, code, err)
      assert.matches("result-tiger-one", out, 1, true)
      -- an authorised GET decrypts; without the token: 401
      local got = http.json(url .. "/api/jobs/" .. a)
      assert.equal("tiger-one", cjson.decode(got.payload).secret)
      assert.equal("result-tiger-one", got.result.r)
      assert.equal(401, (http.req(url .. "/api/jobs/" .. a)))
      -- a payload filter cannot match a sealed payload: refused
      local st, body = http.req(url .. "/api/jobs?where=secret%3Dx", { token = true })
      assert.equal(400, st)
      assert.matches("encrypted", body)
      -- an HTTP push is sealed before the insert
      local p = http.json(url .. "/api/jobs", 201,
        { body = '{"name":"rec","payload":{"secret":"tiger-http"}}' })
      local hid = p.ids and p.ids[1] or p.id
      assert.is_nil(raw(env, hid, "payload"):find("tiger", 1, true))
      env:wait_state(hid, "completed", 30)
      -- the keys appear in no log, no /metrics, no output
      local _, metrics = http.req(url .. "/metrics", { token = true })
      no_key_in(metrics, keys, "/metrics")
      no_key_in(env:log(), keys, "the runner's log")
      no_key_in(out .. err, keys, "show")
      assert.equal(0, env:stop())
      -- a read-only caller (no token: reads open) sees "<encrypted>"
      url = http.start(env, enc, { token = false })
      got = http.json(url .. "/api/jobs/" .. a, 200, { token = false })
      assert.equal("<encrypted>", got.payload)
      assert.equal("<encrypted>", got.result)
      assert.equal("<encrypted>", got.steps)
      assert.equal(0, env:stop())
      -- a read token sees "<encrypted>", a read token granted decrypt
      -- and a write token (http.token) the values
      local rf, sf = env.dir .. "/read-token", env.dir .. "/support-token"
      jr.write_file(rf, "read-token-0123456789abcdef\n")
      jr.write_file(sf, "support-token-0123456789abcdef\n")
      assert(os.execute("chmod 0600 " .. rf .. " " .. sf))
      url = http.start(env, enc, { http = ('tokens = { { name = "grafana", ' ..
        'scope = "read", token_file = %q }, { name = "support", scope = "read", ' ..
        'decrypt = true, token_file = %q } }'):format(rf, sf) })
      got = http.json(url .. "/api/jobs/" .. a, 200,
        { token = "read-token-0123456789abcdef" })
      assert.equal("<encrypted>", got.payload)
      assert.equal("<encrypted>", got.result)
      assert.is_false(http.json(url .. "/api/whoami", 200,
        { token = "read-token-0123456789abcdef" }).decrypt)
      got = http.json(url .. "/api/jobs/" .. a, 200,
        { token = "support-token-0123456789abcdef" })
      assert.equal("tiger-one", cjson.decode(got.payload).secret)
      assert.equal("result-tiger-one", got.result.r)
      local who = http.json(url .. "/api/whoami", 200,
        { token = "support-token-0123456789abcdef" })
      assert.is_true(who.decrypt)
      assert.is_false(who.write)
      -- granted reads only: its writes are refused as any read token's
      assert.equal(403, (http.req(url .. "/api/jobs/" .. a .. "/retry",
        { method = "POST", token = "support-token-0123456789abcdef" })))
      got = http.json(url .. "/api/jobs/" .. a)
      assert.equal("tiger-one", cjson.decode(got.payload).secret)
      no_key_in(env:log(), keys, "the runner's log")
    end)

    it("refuses a key file open to others, malformed or missing, at start and at push", function()
      local kf = keyfile()
      env:script("rec", HANDLER)
      env:config(('encryption = { key_file = %q }'):format(kf))
      os.execute("chmod 640 " .. jr.quote(kf))
      local p = env:start(nil, { wait = false })
      jr.wait_for(function() return not env:alive(p) end, 20, "refused start")
      assert.matches("key file '" .. kf .. "' is open to group or others (mode 0640)",
                     env:log(p), 1, true)
      local _, err, code = env:cli("push", "rec", '{"secret":"x"}')
      assert.are_not.equal(0, code)
      assert.matches("mode 0640", err, 1, true)
      os.execute("chmod 600 " .. jr.quote(kf))
      jr.write_file(kf, jr.read_file(kf) .. "k2 c2hvcnQ=\n")
      _, err, code = env:cli("push", "rec", '{"secret":"x"}')
      assert.are_not.equal(0, code)
      assert.matches(kf .. ":2: the key of 'k2' is not 32 bytes", err, 1, true)
      assert.is_nil(err:find("c2hvcnQ", 1, true))
      p = env:start(nil, { wait = false })
      jr.wait_for(function() return not env:alive(p) end, 20, "refused start")
      assert.matches(kf .. ":2:", env:log(p), 1, true)
      _, err, code = env:cli("check")
      assert.are_not.equal(0, code)
      assert.matches(kf .. ":2:", err, 1, true)
      os.remove(kf)
      p = env:start(nil, { wait = false })
      jr.wait_for(function() return not env:alive(p) end, 20, "refused start")
      assert.matches("key file '" .. kf .. "'", env:log(p), 1, true)
      -- nothing was pushed in clear meanwhile
      local f = io.open(env:sqlite_path(), "r")
      if env.backend == "postgres" or f then
        if f then f:close() end
        local ok, n = pcall(env.count, env)
        assert.is_true(not ok or n == 0)
      end
    end)

    it("refuses a sealed payload whose limit key its path would take, unless the push gives it", function()
      local kf = keyfile()
      env:config(('encryption = { key_file = %q }, limits = { rec = { key = "payload.tenant", per_key = { concurrency = 1 } } }'):format(kf))
      local _, err, code = env:cli("migrate")      -- records the limit path
      assert.equal(0, code, err)
      _, err, code = env:cli("push", "rec", '{"tenant":"acme"}')
      assert.are_not.equal(0, code)
      assert.matches("job 'rec': its limit key comes from its payload (path 'tenant'), which is encrypted",
                     err, 1, true)
      local id = env:push("rec", '{"tenant":"acme"}', "--key", "acme")
      local r = env:query("SELECT limit_key AS k FROM jobs WHERE id = " .. id)[1]
      assert.equal("acme", r.k)
      -- a name without a path is not concerned
      env:push("other", '{"tenant":"acme"}')
    end)

    -- a unique key's replace and a sequence's replace write the new
    -- payload sealed as a push does: never clear, and (SQLite) as the
    -- stub beside its bytes
    it("stores a replacing push's payload sealed, by unique key and by sequence", function()
      local kf = keyfile()
      env:script("rec", HANDLER)
      env:config(('encryption = { key_file = %q }'):format(kf))
      local u = env:push("rec", '{"secret":"old-u"}', "--unique-key", "k", "--in", "60s")
      local u2 = env:push("rec", '{"secret":"tiger-u"}', "--unique-key", "k",
        "--on-conflict", "replace")
      assert.equal(u, u2)
      local s1 = env:push("rec", '{"secret":"head"}', "--sequence", "s", "--in", "60s")
      local s2 = env:push("rec", '{"secret":"old-s"}', "--sequence", "s")
      local s3 = env:push("rec", '{"secret":"tiger-s"}', "--sequence", "s",
        "--on-conflict", "replace")
      assert.equal(s2, s3)
      assert.truthy(s1 < s2)
      for _, id in ipairs({ u, s2 }) do
        local p = raw(env, id, "payload")
        assert.is_nil(p:find("tiger", 1, true), "job " .. id .. "'s payload: " .. p)
        assert.matches('"$jr_enc"', p, 1, true)
        if backend == "sqlite" then
          assert.matches("sealed", p, 1, true)
          assert.equal(1, tonumber(env:query(("SELECT sealed IS NOT NULL AS v FROM jobs" ..
            " WHERE id = %d"):format(id))[1].v))
        end
        local out, err, code = env:cli("show", tostring(id), "--json")
        assert.equal(0, code, err)
        assert.matches("tiger", cjson.decode(out).payload.secret)
      end
    end)

    it("fails the attempt of a job whose key the runner lacks, naming the key id", function()
      local mine = keyfile("mine")
      local theirs = keyfile("theirs")
      local id = keys_of(theirs)[1].id
      env:script("rec", HANDLER)
      env:config(('encryption = { key_file = %q }'):format(theirs))
      local j = env:push("rec", '{"secret":"lost"}', "--max-retries", "0")
      env:config(('encryption = { key_file = %q }'):format(mine))
      env:start()
      local row = env:wait_state(j, "dead", 30)
      assert.matches("key '" .. id .. "', which is not in the key file", row.last_error, 1, true)
      assert.is_true(env:alive())
      -- the runner goes on with the jobs it can read
      local ok = env:push("rec", '{"secret":"fine"}')
      local ran = pcall(jr.wait_for, function()
        local r = env:job(ok)
        return r == nil or r.state == "completed"
      end, 30)
      assert.is_true(ran, env:log())
      assert.equal(0, env:stop())
    end)

    it("rotates while a runner drains and a producer pushes: nothing lost, the old key removable", function()
      local kf = keyfile()
      local old = keys_of(kf)[1].id
      env:script("n", [[
        return function(job)
          local f = assert(io.open(os.getenv("PWD") .. "/ran", "a"))
          f:write(job.payload.n, "\n")
          f:close()
        end]])
      env:config(('encryption = { key_file = %q }, retention = { completed = "1h" }'):format(kf))
      -- pushed with the old key, in one transaction through the Lua module
      local jobs = {}
      for i = 1, 300 do jobs[i] = { "n", { n = i } } end
      local q = jr.client(env)
      assert(q:push_many(jobs))
      q:close()
      local out, err, code = env:cli("keys", "new", kf)
      assert.equal(0, code, err)
      local new = keys_of(kf)[1].id
      env:start()
      -- a producer pushes with the new key while the rotation runs
      local bg = io.popen(("for i in $(seq 301 360); do %s -c %s push n '{\"n\":'$i'}' >/dev/null || exit 1; done; echo done"):format(
        jr.quote(jr.bin), jr.quote(env.config_file)))
      out, err, code = env:cli("keys", "rotate", "--batch", "50")
      assert.is_true(code == 0 or code == 1, err)
      assert.equal("done", bg:read("l"))
      bg:close()
      jr.wait_for(function()
        return #jr.lines(env.dir .. "/ran") >= 360
      end, 60, "every job ran")
      assert.equal(0, env:stop())
      out, err, code = env:cli("keys", "rotate", "--batch", "50")
      assert.equal(0, code, err .. out)
      out, err, code = env:cli("keys", "status")
      assert.equal(0, code, err)
      assert.is_nil(out:find("'" .. old .. "'", 1, true), out)
      assert.matches("no value uses a key but '" .. new .. "'", out, 1, true)
      -- each job ran once, and every row reads back
      local seen = {}
      for _, l in ipairs(jr.lines(env.dir .. "/ran")) do seen[l] = (seen[l] or 0) + 1 end
      for i = 1, 360 do assert.equal(1, seen[tostring(i)], "job " .. i) end
      out, err, code = env:cli("show", "1", "--json")
      assert.equal(0, code, err)
      assert.equal(1, cjson.decode(out).payload.n)
    end)
  end)
end
