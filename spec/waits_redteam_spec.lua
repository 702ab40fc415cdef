-- waits_redteam_spec.lua - hostile and careless input to signals and
-- durable sleep (docs/handlers.md, "Signals and durable sleep"), on both
-- backends: what a sender gives is refused whole, with a message, and
-- the waiting job is left as it was.
local jr = require "jr"
local H = require "jrhttp"

local WAITER = [[
  local jobrunner = require "jobrunner"
  return function(job)
    local v = jobrunner.wait_signal("a")
    return { v = v }
  end]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": signals red team", function()
    local env = jr.test_env(backend)

    it("a signal name with a NUL inside (HTTP \\u0000, a Lua string with \\0) is refused, not cut to its head", function()
      env:script("waiter", WAITER)
      local base = H.start(env, "concurrency = 1")
      local id = env:push("waiter", "{}")
      env:wait_state(id, "waiting")
      local url = ("%s/api/jobs/%d/signal"):format(base, id)
      local code, text = H.req(url, { body = '{"name": "a\\u0000zz"}', token = true })
      assert.are.equal(400, code, text)
      assert.truthy(text:find("signal name", 1, true), text)
      local q <close> = jr.client(env)
      local ok, err = q:signal(id, "a\0zz", { x = 1 })
      assert.is_nil(ok)
      assert.truthy(err:find("invalid signal name", 1, true), err)
      -- the job still waits for "a", no signal recorded
      jr.sleep(1.5)
      local row = env:job(id)
      assert.are.equal("waiting", row.state)
      local w = env:query("SELECT waits FROM jobs WHERE id = " .. id)[1].waits
      assert.falsy(tostring(w):find("signals", 1, true), tostring(w))
      -- a right one still goes through
      assert.is_true(q:signal(id, "a", { x = 2 }))
      env:wait_state(id, "completed")
    end)
  end)
end
