-- encryption_red_spec.lua - the key file and the envelope against a
-- careless user or an attacker (docs/operations.md, "Encryption"), on
-- each engine: a key file that is a FIFO is refused, not waited on;
-- `keys new` run by several processes at once keeps every key it said it
-- added; `keys new` on a symlink writes the file it points at and leaves
-- the link; a push of a payload shaped as an envelope that does not open
-- with the key file is refused at the push (else the job would fail at
-- each attempt), while a sealed value read raw and pushed again is kept.
local jr = require "jr"
local http = require "jrhttp"
local cjson = require "cjson"

local q = jr.quote

local function no_key_in(text, keyfile)
  for b64 in keyfile:gmatch("%S+ (%S+)") do
    assert.is_nil(text:find(b64, 1, true), "a key's text in the log")
  end
end

local function lines_of(path)
  local n = 0
  for _ in (jr.read_file(path) or ""):gmatch("[^\n]+") do n = n + 1 end
  return n
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " encryption, red team:", function()
    local env = jr.test_env(backend)

    it("refuses a key file that is a FIFO instead of waiting on it", function()
      local ff = env.dir .. "/fifo"
      jr.sh("rm -f " .. q(ff) .. " && mkfifo -m 600 " .. q(ff))
      env:config(('encryption = { key_file = %q }'):format(ff))
      local cmd = ("cd %s && timeout 30 %s -c %s "):format(q(env.dir), q(jr.bin),
        q(env.config_file))
      local out, err, code = jr.sh(cmd .. "push echo '{}'")
      assert.not_equal(124, code, "push waited on the FIFO")
      assert.not_equal(0, code, out)
      assert.matches("key file '" .. ff .. "' is not a regular file", err, 1, true)
      out, err, code = jr.sh(cmd .. "keys new " .. q(ff))
      assert.not_equal(124, code, "keys new waited on the FIFO")
      assert.matches("is not a regular file", err, 1, true)
    end)

    it("keeps every key that keys new run at once said it added", function()
      local kf = env.dir .. "/race"
      local runs, procs = 6, 4
      local script = {}
      for r = 1, runs do
        for p = 1, procs do
          script[#script + 1] = ("%s keys new %s >>%s 2>&1 &"):format(q(jr.bin),
            q(kf), q(env.dir .. "/race.out" .. p))
        end
        script[#script + 1] = "wait"
      end
      jr.sh(table.concat(script, "\n"))
      local added, failed = 0, {}
      for p = 1, procs do
        local t = jr.read_file(env.dir .. "/race.out" .. p) or ""
        for _ in t:gmatch("added at the top") do added = added + 1 end
        for l in t:gmatch("[^\n]+") do
          if not l:find("added at the top", 1, true) then failed[#failed + 1] = l end
        end
      end
      assert.same({}, failed)
      assert.equal(runs * procs, added)
      assert.equal(added, lines_of(kf))
      assert.equal("-rw-------", (jr.sh("stat -c %A " .. q(kf))):match("%S+"))
    end)

    it("adds a key in a directory its user may write but not read", function()
      local top = jr.sh("mktemp -d"):match("%S+")
      local d = top .. "/d"
      jr.sh(("chmod 755 %s && mkdir %s && chown nobody %s && chmod 300 %s"):format(
        q(top), q(d), q(d), q(d)))
      local cmd = ("setpriv --reuid=nobody --regid=nogroup --clear-groups %s keys new %s")
        :format(q(jr.bin), q(d .. "/k"))
      for _ = 1, 2 do
        local out, err, code = jr.sh(cmd)
        assert.equal(0, code, err .. out)
      end
      jr.sh("chmod 700 " .. q(d))
      assert.equal(2, lines_of(d .. "/k"))
      jr.sh("rm -rf " .. q(top))
    end)

    it("adds the key to the file a symlink points at, the link kept", function()
      local real, link = env.dir .. "/real-keys", env.dir .. "/keys-link"
      local _, err, code = env:cli("keys", "new", real)
      assert.equal(0, code, err)
      jr.sh(("ln -sf %s %s"):format(q(real), q(link)))
      _, err, code = env:cli("keys", "new", link)
      assert.equal(0, code, err)
      assert.equal("symbolic link", (jr.sh("stat -c %F " .. q(link))):match("^(.-)\n"))
      assert.equal(2, lines_of(real))
    end)

    it("refuses at push an envelope that does not open, keeps one that does", function()
      local kf = env.dir .. "/keys"
      local _, err, code = env:cli("keys", "new", kf)
      assert.equal(0, code, err)
      local id = jr.read_file(kf):match("^(%S+)")
      env:config(('encryption = { key_file = %q }'):format(kf))
      for _, forged in ipairs({
        ('{"$jr_enc":"v1:%s:AAAA"}'):format(id),
        ('{"$jr_enc":"v1:%s:%s"}'):format(id, ("A"):rep(88)),
        '{"$jr_enc":"v1:nokey:AAAA"}',
      }) do
        local out, e, c = env:cli("push", "echo", forged)
        assert.not_equal(0, c, forged .. " pushed: " .. out)
        assert.matches("job 'echo': its payload is an encrypted value", e, 1, true)
      end
      -- a sealed value read raw and pushed again is stored as it is: a
      -- stub and its bytes, read back as the envelope; the stub alone
      -- does not open
      local a = env:push("echo", '{"secret":"tiger"}')
      local sealed = jr.stored_payload(env, a)
      assert.matches('^{"%$jr_enc":"v1:' .. id .. ':[A-Za-z0-9+/=]+"}$', sealed)
      local b = env:push("echo", sealed)
      assert.equal(sealed, jr.stored_payload(env, b))
      local stub = ('{"$jr_enc":"v1:%s:sealed"}'):format(id)
      local _, e2, c2 = env:cli("push", "echo", stub)
      assert.not_equal(0, c2)
      assert.matches("job 'echo': its payload is an encrypted value", e2, 1, true)
      local out, e, c = env:cli("show", tostring(b), "--json")
      assert.equal(0, c, e)
      assert.matches('"secret":"tiger"', out, 1, true)
      -- over HTTP: a 400 naming the job, for a push and for a flow
      env:script("echo", "return function() end")
      local url = http.start(env, ('encryption = { key_file = %q }'):format(kf))
      local forged = cjson.decode(('{"$jr_enc":"v1:%s:AAAA"}'):format(id))
      local st, body = http.req(url .. "/api/jobs", { token = true,
        body = cjson.encode({ name = "echo", payload = forged }) })
      assert.equal(400, st, body)
      assert.matches("job 'echo': its payload is an encrypted value", body, 1, true)
      st, body = http.req(url .. "/api/flows", { token = true,
        body = cjson.encode({ { ref = "a", name = "echo", payload = forged } }) })
      assert.equal(400, st, body)
      assert.matches("its payload is an encrypted value", body, 1, true)
      assert.equal(0, env:stop())
    end)

    it("says why a key the runner lacks was not found when its file broke", function()
      local kf, kf2 = env.dir .. "/keys-runner", env.dir .. "/keys-producer"
      for _, f in ipairs({ kf, kf2 }) do
        local _, err, code = env:cli("keys", "new", f)
        assert.equal(0, code, err)
      end
      env:script("echo", "return function() end")
      env:config(('encryption = { key_file = %q }'):format(kf))
      env:start()
      -- the runner's file broken while it runs; a producer seals with a
      -- key the runner does not have
      local f = assert(io.open(kf, "a"))
      f:write("not-a-key-line\n")
      f:close()
      env:config(('encryption = { key_file = %q }'):format(kf2))
      local id = env:push("echo", '{"v":1}')
      local last
      jr.wait_for(function()
        local r = env:query(("SELECT last_error FROM jobs WHERE id = %d"):format(id))[1]
        last = r and r.last_error
        return type(last) == "string" and last ~= ""
      end, 60, "the job's attempt failed")
      assert.matches("which is not in the key file '" .. kf .. "'", last, 1, true)
      assert.matches("the file read again: " .. kf .. ":", last, 1, true)
      assert.equal(0, env:stop())
      -- keys status with the runner's (fixed) file: its other keys may
      -- go, but it does not claim that no value uses another key
      local fixed = jr.read_file(kf):gsub("not%-a%-key%-line\n", "")
      f = assert(io.open(kf, "w"))
      f:write(fixed)
      f:close()
      env:config(('encryption = { key_file = %q }'):format(kf))
      local out, err, code = env:cli("keys", "status")
      assert.equal(0, code, err)
      assert.is_nil(out:find("no value uses a key but", 1, true), out)
      assert.matches("1 value under a key not in the file cannot be read", out, 1, true)
    end)

    it("takes a key file saved with a BOM and CRLF, and keys new keeps it so", function()
      local kf = env.dir .. "/keys-bom"
      local _, err, code = env:cli("keys", "new", kf)
      assert.equal(0, code, err)
      local line = jr.read_file(kf):match("^([^\n]+)")
      local f = assert(io.open(kf, "w"))
      f:write("\239\187\191", line, "\r\n")
      f:close()
      env:config(('encryption = { key_file = %q }'):format(kf))
      env:push("echo", '{"v":1}')
      _, err, code = env:cli("keys", "new", kf)
      assert.equal(0, code, err)
      assert.equal(2, lines_of(kf))
      env:push("echo", '{"v":2}')
    end)

    it("does not run a sealed job on a runner without a key file", function()
      local kf = env.dir .. "/keys-only-producer"
      local _, err, code = env:cli("keys", "new", kf)
      assert.equal(0, code, err)
      env:script("seen", [[
        return function(job)
          local f = assert(io.open(os.getenv("PWD") .. "/seen-unkeyed", "a"))
          f:write(require("cjson").encode(job.payload), "\n")
          f:close()
          return { ok = true }
        end]])
      env:config(('encryption = { key_file = %q }'):format(kf))
      local id = env:push("seen", '{"secret":"tiger"}')
      env:config("")
      local plain = env:push("seen", '{"plain":1}')
      env:start()
      env:wait_state(plain, "completed", 60)
      local last
      jr.wait_for(function()
        local r = env:query(("SELECT last_error FROM jobs WHERE id = %d"):format(id))[1]
        last = r and r.last_error
        return type(last) == "string" and last ~= ""
      end, 60, "the sealed job's attempt failed")
      assert.matches("job " .. id .. ": its payload cannot be decrypted: encrypted with key '",
        last, 1, true)
      assert.matches("this runner has no key file (encryption.key_file)", last, 1, true)
      assert.equal(0, env:stop())
      local seen = jr.read_file(env.dir .. "/seen-unkeyed") or ""
      assert.is_nil(seen:find("$jr_enc", 1, true), seen)
      assert.matches('"plain":1', seen, 1, true)
    end)

    it("warns when a reload adds, moves or removes the key file", function()
      local kf = env.dir .. "/keys-reload"
      local _, err, code = env:cli("keys", "new", kf)
      assert.equal(0, code, err)
      env:script("echo", "return function() return {} end")
      env:config("")
      env:start()
      env:config(('encryption = { key_file = %q }'):format(kf))
      env:signal("HUP")
      jr.wait_for(function()
        return env:log():find("reload: encryption.key_file changed", 1, true)
      end, 60, "the reload's warning")
      assert.matches("(was none, now '" .. kf .. "'); values are sealed and opened as at the start until the runner is restarted",
        env:log(), 1, true)
      no_key_in(env:log(), jr.read_file(kf))
      assert.equal(0, env:stop())
    end)
  end)
end
