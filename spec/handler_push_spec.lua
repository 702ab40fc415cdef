-- handler_push_spec.lua - jobrunner.push inside handlers encodes payloads
-- with the producers' encoder (runtime/lua/json.c): exact integers, shortest
-- floats, jobrunner.null and jobrunner.array(), and errors naming the key.
local jr = require "jr"

-- The pushed payload, as stored. PostgreSQL's jsonb reorders keys and adds
-- spaces, so each member is matched on its own.
local members = {
  { "big", "9223372036854775807" },
  { "neg", "%-9223372036854775808" },
  { "f", "0%.1" },
  { "t", "{}" },
  { "a", "%[%]" },
  { "n", "null" },
}

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " handler push:", function()
    local env = jr.test_env(backend)

    it("stores exact integers, short floats, {}, [] and null", function()
      env:script("parent", [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          jobrunner.push("unhandled.next", {
            big = math.maxinteger, neg = math.mininteger, f = 0.1,
            t = {}, a = jobrunner.array(), n = jobrunner.null,
          })
        end }]])
      env:start()
      local id = env:push("parent")
      local row = jr.wait_for(function()
        local rows = env:jobs("name = 'unhandled.next'")
        return env:job(id) == nil and rows[1]
      end)
      assert.equal("queued", row.state)
      assert.truthy(row.payload:find("9223372036854775807", 1, true))
      for _, m in ipairs(members) do
        assert.truthy(row.payload:find('"' .. m[1] .. '":%s*' .. m[2] .. "[,}]"),
          m[1] .. " in " .. row.payload)
      end
      if backend == "sqlite" then
        assert.equal('{"a":[],"big":9223372036854775807,"f":0.1,"n":null,' ..
          '"neg":-9223372036854775808,"t":{}}', row.payload)
      end
      assert.equal(0, env:stop())
    end)

    it("hands the follow-up its payload", function()
      env:script("parent", [[
        local jobrunner = require "jobrunner"
        return function(job)
          jobrunner.push("child", { i = 42, f = 0.1, s = "é", n = jobrunner.null })
        end]])
      env:script("child", [[
        local cjson = require "cjson"
        return function(job)
          local p = job.payload
          local f = assert(io.open(os.getenv("PWD") .. "/got", "w"))
          f:write(math.type(p.i), " ", p.i, " ", p.f, " ", p.s, " ",
                  tostring(p.n == cjson.null))
          f:close()
        end]])
      env:start()
      env:push("parent")
      jr.wait_file(env.dir .. "/got")
      assert.equal("integer 42 0.1 é true", jr.read_file(env.dir .. "/got"))
      jr.wait_for(function() return env:count() == 0 end)
      assert.equal(0, env:stop())
    end)

    it("fails the job when a payload holds a function, naming the key", function()
      env:script("parent", [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          jobrunner.push("unhandled.next", { a = { b = function() end } })
        end }]])
      env:start()
      local id = env:push("parent")
      local row = jr.wait_for(function()
        local r = env:job(id)
        return r and r.state == "dead" and r
      end)
      assert.truthy(row.last_error:find(
        "jobrunner.push: payload of 'unhandled.next': payload.a.b: " ..
        "cannot encode a function", 1, true), row.last_error)
      assert.equal(1, env:count())
      assert.equal(0, env:stop())
    end)
  end)
end
