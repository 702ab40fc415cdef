-- http_stop_spec.lua - a runner stopped (SIGTERM) with 50 long polls held
-- (GET /api/jobs/ID?wait=S) answers each of them, a 200 with its job as
-- it stands, before it closes their connections, on both backends.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

local N = 50

-- Starts curl on url in the background; returns a handle whose read()
-- gives status and body once curl is done (status 0: no answer).
local function poll(url)
  local out = os.tmpname()
  os.execute(("(curl -s -m 200 -H %s -w '\\n%%{http_code}' %s > %s.part; " ..
    "mv %s.part %s) &"):format(jr.quote("Authorization: Bearer " .. H.TOKEN),
    jr.quote(url), out, out, out))
  return {
    read = function()
      -- os.tmpname made the file empty: curl's answer is in once the
      -- mv put its part there (an empty read is a curl not done yet)
      local text = jr.wait_for(function()
        local f = io.open(out)
        local s = f and f:read("a")
        if f then f:close() end
        return s ~= nil and s ~= "" and s
      end, 60, "curl done")
      os.remove(out)
      local body, code = text:match("^(.*)\n(%d+)$")
      return tonumber(code), body
    end,
  }
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " http stop:", function()
    local env = jr.test_env(backend)

    it("answers every long poll held with its job before closing", function()
      env:script("ok", "return function() end")
      local base = H.start(env, 'log = { level = "debug" }')
      local ids, polls = {}, {}
      for i = 1, N do
        ids[i] = env:push("nohandler", ('{"i":%d}'):format(i))
        polls[i] = poll(("%s/api/jobs/%d?wait=120"):format(base, ids[i]))
      end
      -- held: a look at their jobs names all of them (an end of a job of
      -- this runner asks for one)
      local held = ("a look at the jobs of %d long polls"):format(N)
      local deadline = jr.now() + 90
      while not env:log():find(held, 1, true) do
        assert(jr.now() < deadline, "the 50 polls held within 90s")
        env:push("ok")
        local t = jr.now() + 3
        while jr.now() < t and not env:log():find(held, 1, true) do
          jr.sleep(0.1)
        end
      end
      assert.equal(0, env:stop("TERM"))
      for i = 1, N do
        local code, body = polls[i].read()
        assert.equal(200, code, body)
        local job = cjson.decode(body)
        assert.equal(ids[i], job.id)
        assert.equal("queued", job.state)
      end
    end)
  end)
end
