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

-- A job that waits holds no unique key (only queued and running ones do),
-- so a push of its key makes a second job; it must still be woken.
local PAUSER = [[
  local jobrunner = require "jobrunner"
  return function(job)
    if job.payload.pause then jobrunner.sleep(job.payload.pause) end
    local v, why = jobrunner.wait_signal("go",
                                         job.payload.timeout and { timeout = job.payload.timeout })
    return { v = v, why = why }
  end]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": a waiting job's unique key", function()
    local env = jr.test_env(backend, { config = "concurrency = 4" })

    it("a signal or a deadline wakes it while another job of its key runs: it runs on as a plain job", function()
      env:script("uk", PAUSER)
      env:start()
      -- a: waits for a signal; b: waits with a deadline of 4 s; both keyed
      local a = env:push("uk", "{}", "--unique-key", "ka", "--result-ttl", "1h")
      local b = env:push("uk", '{"timeout": 4}', "--unique-key", "kb", "--result-ttl", "1h")
      env:wait_state(a, "waiting")
      env:wait_state(b, "waiting")
      -- their keys are free: new jobs take them and run (a long pause)
      local a2 = env:push("uk", '{"pause": 30}', "--unique-key", "ka")
      local b2 = env:push("uk", '{"pause": 30}', "--unique-key", "kb")
      assert.are_not.equal(a, a2)
      assert.are_not.equal(b, b2)
      env:wait_state(a2, "running")
      env:wait_state(b2, "running")
      -- the signal makes a ready, not a constraint error
      local out, err, code = env:cli("signal", tostring(a), "go", '{"n":1}')
      assert.are.equal(0, code, out .. err)
      assert.truthy(out:find("delivered", 1, true), out)
      -- b's deadline passes: it is woken, and no wake-up fails
      env:wait_state(a, "completed", 30)
      env:wait_state(b, "completed", 30)
      assert.falsy(env:log():find("UNIQUE", 1, true) or env:log():find("duplicate key", 1, true), env:log())
      assert.are.equal("running", env:job(a2).state)
      assert.are.equal("running", env:job(b2).state)
    end)
  end)
end

-- A payload as deep as a push may be (1000 levels) sits three levels down
-- in the job's waits record ({"signals": {NAME: {"payload": ...}}}).
local DEPTH = [[
  local jobrunner = require "jobrunner"
  return function(job)
    local v = jobrunner.wait_signal("deep")
    local n = 0
    while type(v) == "table" do n = n + 1; v = v[1] end
    return { depth = n }
  end]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": a deep signal payload", function()
    local env = jr.test_env(backend, { config = "concurrency = 1" })

    it("as deep as a push may be, sent and accepted: its wait_signal returns it", function()
      env:script("deep", DEPTH)
      env:start()
      local id = env:push("deep", "{}", "--result-ttl", "1h")
      env:wait_state(id, "waiting")
      local deep = ("["):rep(1000) .. ("]"):rep(1000)
      local out, err, code = env:cli("signal", tostring(id), "deep", deep)
      assert.are.equal(0, code, out .. err)
      env:wait_state(id, "completed", 30)
      local r = env:query("SELECT result FROM jobs WHERE id = " .. id)[1].result
      if type(r) == "string" then r = require("cjson").decode(r) end
      assert.are.same({ depth = 1000 }, r)
      assert.are.equal(1, env:job(id).attempts)
    end)
  end)
end
