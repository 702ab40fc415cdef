-- encryption_red_spec.lua - the key file and the envelope against a
-- careless user or an attacker (docs/operations.md, "Encryption"), on
-- each engine: a key file that is a FIFO is refused, not waited on;
-- `keys new` run by several processes at once keeps every key it said it
-- added; `keys new` on a symlink writes the file it points at and leaves
-- the link.
local jr = require "jr"

local q = jr.quote

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
  end)
end
