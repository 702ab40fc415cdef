-- sealed_red_spec.lua - an encrypted payload stored as its stub and
-- bytes (the column sealed, docs/operations.md "Encryption") against a
-- careless user or an attacker, on each engine: a pending job replaced by
-- a sealed push (a unique key's replace, a sequence's replace), rerun
-- with a new payload, or replaced by a push in clear reads the push's
-- payload, never the old one (every sealed stub of one key has the same
-- text: the bytes must follow); the stub written by plain SQL with no
-- bytes opens nothing, and show, keys status and keys rotate go on.
local jr = require "jr"
local cjson = require "cjson"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " sealed payloads, red team:", function()
    local env = jr.test_env(backend)
    local kf, enc

    local function payload_of(id)
      local out, err, code = env:cli("show", tostring(id), "--json")
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
  end)
end
