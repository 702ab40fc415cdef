-- sealed_red_spec.lua - an encrypted payload stored as its stub and
-- bytes (the column sealed, docs/operations.md "Encryption") against a
-- careless user or an attacker, on each engine: a pending job replaced by
-- a sealed push (a unique key's replace, a sequence's replace), rerun
-- with a new payload, or replaced by a push in clear reads the push's
-- payload, never the old one (every sealed stub of one key has the same
-- text: the bytes must follow); the stub written by plain SQL with no
-- bytes opens nothing, and show, keys status and keys rotate go on; a
-- push token granted decrypt sees its own queues' values decrypted, not
-- another queue's (docs/http.md, "Scoped tokens").
local jr = require "jr"
local http = require "jrhttp"
local cjson = require "cjson"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " sealed payloads, red team:", function()
    local env = jr.test_env(backend)
    local kf, enc

    local function payload_of(id)
      local out, err, code = env:cli("show", ("%d"):format(id), "--json")
      assert.equal(0, code, err)
      return cjson.decode(out).payload
    end

    before_each(function()
      kf = env.dir .. "/keys"
      if not jr.read_file(kf) then
        local _, err, code = env:cli("keys", "new", kf)
        assert.equal(0, code, err)
      end
      enc = ('encryption = { key_file = %q }'):format(kf)
      env:config(enc)
    end)

    it("gives a job replaced by a sealed push the push's payload", function()
      local u = env:push("echo", '{"v":"old-unique"}', "--unique-key", "u1")
      local out, err, code = env:cli("push", "echo", '{"v":"new-unique"}',
        "--unique-key", "u1", "--on-conflict", "replace")
      assert.equal(0, code, err)
      assert.matches("replaced", out, 1, true)
      assert.equal("new-unique", payload_of(u).v)
      local s = env:push("echo", '{"v":"old-seq"}', "--sequence", "s1")
      out, err, code = env:cli("push", "echo", '{"v":"new-seq"}',
        "--sequence", "s1", "--on-conflict", "replace")
      assert.equal(0, code, err)
      assert.equal(s .. " replaced", out:match("^(%d+ %a+)"))
      assert.equal("new-seq", payload_of(s).v)
      -- a job in clear replaced by a sealed push: its stub has bytes
      env:config("")
      local c = env:push("echo", '{"v":"clear"}', "--sequence", "s2")
      env:config(enc)
      out, err, code = env:cli("push", "echo", '{"v":"sealed-over-clear"}',
        "--sequence", "s2", "--on-conflict", "replace")
      assert.equal(0, code, err)
      assert.equal("sealed-over-clear", payload_of(c).v)
      -- and a sealed job replaced by a push in clear reads the clear one
      env:config("")
      out, err, code = env:cli("push", "echo", '{"v":"clear-over-sealed"}',
        "--sequence", "s1", "--on-conflict", "replace")
      assert.equal(0, code, err)
      env:config(enc)
      assert.equal("clear-over-sealed", payload_of(s).v)
      -- rerun with a payload of its own
      local r = env:push("echo", '{"v":"before-rerun"}')
      _, err, code = env:cli("rerun", tostring(r), "--payload", '{"v":"after-rerun"}')
      assert.equal(0, code, err)
      assert.equal("after-rerun", payload_of(r).v)
    end)

    it("replaces by a unique key and in a sequence in one HTTP push", function()
      local u = env:push("echo", '{"v":"old-u"}', "--unique-key", "k1")
      local s = env:push("echo", '{"v":"old-s"}', "--sequence", "q1")
      local url = http.start(env, enc .. ', serve_queues = { "none" }')
      local got = http.json(url .. "/api/jobs", 201, { body = cjson.encode({
        { name = "echo", payload = { v = "new-u" }, unique_key = "k1", on_conflict = "replace" },
        { name = "echo", payload = { v = "new-s" }, sequence = "q1", on_conflict = "replace" },
        { name = "echo", payload = { v = "plain" } } }) })
      assert.same({ "replaced", "replaced", "new" }, got.outcomes)
      assert.same({ u, s }, { got.ids[1], got.ids[2] })
      assert.equal(0, env:stop())
      assert.equal("new-u", payload_of(u).v)
      assert.equal("new-s", payload_of(s).v)
      assert.equal("plain", payload_of(got.ids[3]).v)
    end)

    it("opens nothing from a stub written by plain SQL, and goes on", function()
      local kid = jr.read_file(kf):match("^(%S+)")
      local a = env:push("echo", '{"v":"someone-else"}')
      env:exec(("INSERT INTO jobs (name, queue, payload) VALUES ('echo', 'default', '%s')")
        :format(('{"$jr_enc":"v1:%s:sealed"}'):format(kid)))
      local b = math.tointeger(env:query("SELECT max(id) AS m FROM jobs")[1].m)
      assert.is_true(b > a)
      local out, err = env:cli("show", tostring(b), "--json")
      assert.is_nil((out .. err):find("someone-else", 1, true))
      local code
      out, err, code = env:cli("keys", "status")
      assert.equal(0, code, err)
      out, err, code = env:cli("keys", "rotate", "--plain")
      assert.equal(0, code, err)
      assert.equal("someone-else", payload_of(a).v)
    end)

    it("decrypts for a push token granted it in its queues only", function()
      local mine = env:push("echo", '{"secret":"tiger-mine"}', "--queue", "q1")
      local other = env:push("echo", '{"secret":"tiger-other"}', "--queue", "q2")
      local pf, rf = env.dir .. "/push-token", env.dir .. "/read-token"
      local P, R = "push-token-0123456789abcdef", "read-token-0123456789abcdef"
      jr.write_file(pf, P .. "\n")
      jr.write_file(rf, R .. "\n")
      assert(os.execute("chmod 0600 " .. jr.quote(pf) .. " " .. jr.quote(rf)))
      local url = http.start(env, enc .. ', serve_queues = { "none" }', { http = (
        'tokens = { { name = "ci", scope = "push", queues = { "q1" }, decrypt = true,' ..
        ' token_file = %q }, { name = "ro", scope = "read", token_file = %q } }')
        :format(pf, rf) })
      assert.is_true(http.json(url .. "/api/whoami", 200, { token = P }).decrypt)
      local got = http.json(url .. "/api/jobs/" .. mine, 200, { token = P })
      assert.equal("tiger-mine", cjson.decode(got.payload).secret)
      for _, path in ipairs({ "", "?wait=0" }) do
        local st, body = http.req(url .. "/api/jobs/" .. other .. path, { token = P })
        assert.equal(200, st, body)
        assert.is_nil(body:find("tiger", 1, true), body)
        assert.equal("<encrypted>", cjson.decode(body).payload)
      end
      -- a read token without the grant: no route shows a value
      for _, path in ipairs({ "/api/jobs/" .. mine, "/api/jobs/" .. mine .. "?wait=0",
          "/api/jobs/" .. mine .. "/logs", "/api/jobs?limit=5", "/api/jobs?queue=q1",
          "/api/stats", "/api/runner" }) do
        local st, body = http.req(url .. path, { token = R })
        assert.equal(200, st, path .. ": " .. body)
        assert.is_nil(body:find("tiger", 1, true), path .. ": " .. body)
      end
      assert.equal(0, env:stop())
    end)
  end)
end
