-- slowhttp_load_spec.lua - bench/slowhttp's lean client (the I/O-bound
-- bench's ceiling and its start beside jobrunner's): `load PORT CONNS N`
-- ends once N answers came, and so does `load ... each`, which sends each
-- connection's request as soon as it is open, also when the last answer
-- comes while it still opens connections (it waited forever then: the
-- answer's loopbreak ended a pass of the loop, not the dispatch after it).
-- No backend: the tool alone against bench/slowhttp's server.
local jr = require "jr"

local slow_server = require("rawhttp").slow
local BIN = (os.getenv("BUILD") or "build") .. "/bench/slowhttp"

describe("bench/slowhttp load:", function()
  for _, mode in ipairs({ "", " each" }) do
    it("ends after its answers" .. (mode ~= "" and " (each)" or ""),
       function()
      local base, stop = slow_server(0)
      finally(stop)
      local port = base:match(":(%d+)$")
      -- 5 answers over 200 connections, answered at once: with each, the
      -- 5 come while the client still opens the other 195
      local out, err, code = jr.sh(("timeout 20 %s load %s 200 5%s"):format(
        BIN, port, mode))
      assert.equal(0, code, "exit " .. tostring(code) .. ": " .. err)
      assert.truthy(out:match("^secs=[%d.]+ rate=[%d.]+ reconnects=0"), out)
      assert.equal("5", (jr.sh("curl -s " .. base .. "/count")):match("%d+"))
    end)
  end
end)
