-- lua_modules_spec.lua - the two Lua modules have distinct names: the
-- producer module is "jobrunner.client" (build/jobrunner.so), with
-- "jobrunner" kept as its alias outside the runner so existing producers do
-- not break; inside handlers "jobrunner" is the handler module, and a
-- handler can open the producer module as "jobrunner.client" when it is
-- installed where Lua finds C modules.
local h = require "jr"

for _, backend in ipairs(h.backends()) do
  describe(backend .. " Lua module names:", function()
    local env = h.test_env(backend)

    it("loads the producer module as jobrunner.client, and as jobrunner", function()
      local client = require "jobrunner.client"
      local alias = require "jobrunner"
      assert.equal(client, alias)
      assert.is_function(client.open)
      assert.is_function(client.encode)
      assert.is_nil(client.snooze)
      local q = assert(client.open(env.url, { schema = env.schema }))
      assert.matches("^jobrunner.client", tostring(q))
      assert.is_number(q:push("x", {}))
      q:close()
      assert.equal(1, env:count())
    end)

    it("gives handlers the handler module as jobrunner, and the producer " ..
       "module as jobrunner.client", function()
      env:script("probe", h.RECORD .. [[
        local jobrunner = require "jobrunner"
        return function(job)
          record("seen", "handler " .. tostring(type(jobrunner.snooze)) ..
                         " " .. tostring(type(jobrunner.open)))
          local client = require "jobrunner.client"
          record("seen", "client " .. tostring(type(client.open)) .. " " ..
                         tostring(type(client.snooze)))
          local q = assert(client.open(job.payload.url,
                                       { schema = job.payload.schema }))
          assert(q:push("other", { from = job.id }))
          q:close()
        end]])
      env:start(("LUA_CPATH=%s"):format(h.quote(h.root .. "/build/?.so;;")))
      local id = env:push("probe", require("cjson").encode({
        url = env.url, schema = env.schema }))
      h.wait_for(function() return env:job(id) == nil end)
      assert.same({ "handler function nil", "client function nil" },
                  h.lines(env.dir .. "/seen"))
      assert.equal(1, env:count())
      assert.equal(0, env:stop())
    end)
  end)
end
