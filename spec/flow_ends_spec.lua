-- flow_ends_spec.lua - the ends of workflows (docs/workflows.md), on each
-- backend: a push into a batch that has finished is refused as finished
-- (from the CLI and from a callback adding to its own batch, which ends
-- dead saying so); a child made dead by its dead parent and retried sees
-- that parent in job.parents.
local jr = require "jr"
local cjson = require "cjson"

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function key(id) return tostring(math.tointeger(id)) end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " flow ends:", function()
    local env = jr.test_env(backend)

    it("refuses a push into a finished batch as finished, from the CLI and a callback", function()
      env:script("member", "return function(job) end")
      -- the callback adds to its own batch, which has finished
      env:script("cb", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          record("cb", tostring(job.payload.batch))
          jobrunner.push("member", {}, { batch = job.payload.batch })
        end }]])
      write(env.dir .. "/b.json", [[{"jobs":[{"name":"member"}],
        "batch":{"on_complete":"cb"}}]])
      local out, err, code = env:cli("push-flow", "--json", env.dir .. "/b.json")
      assert.equal(0, code, err)
      local batch = key(cjson.decode(out).batch)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/cb") == 1 end, 20, "callback")
      local cb = jr.wait_for(function()
        local rows = env:jobs("name = 'cb' AND state = 'dead'")
        return rows[1]
      end, 20, "the callback dead")
      assert.truthy(cb.last_error:find("job 'member': batch " .. batch .. " is finished", 1, true),
        cb.last_error)
      assert.equal(0, env:stop())
      out, err, code = env:cli("push", "member", "--batch", batch)
      assert.are_not.equal(0, code)
      assert.truthy(err:find("job 'member': batch " .. batch .. " is finished", 1, true), err)
      out, err, code = env:cli("push", "member", "--batch", "999")
      assert.are_not.equal(0, code)
      assert.truthy(err:find("job 'member': batch 999 does not exist", 1, true), err)
    end)

    it("shows a child made dead by its dead parent that parent when retried", function()
      env:script("parent", "return { max_retries = 0, handle = function() error('parent broke') end }")
      env:script("child", jr.RECORD .. [[
        local cjson = require "cjson"
        return function(job)
          local parents = {}
          for id, p in pairs(job.parents or {}) do
            parents[tostring(id)] = p.state
          end
          record("child", cjson.encode(parents))
        end]])
      local parent = env:push("parent")
      local child = env:push("child", nil, "--after", tostring(parent),
                             "--on-parent-failure", "dead")
      env:start()
      local row = env:wait_state(child, "dead", 20)
      assert.equal("parent " .. parent .. " ended dead", row.last_error)
      local out, err, code = env:cli("dead", "retry", tostring(child))
      assert.equal(0, code, out .. err)
      jr.wait_for(function() return #jr.lines(env.dir .. "/child") == 1 end, 20,
        "the child ran")
      local seen = cjson.decode(jr.lines(env.dir .. "/child")[1])
      assert.are.same({ [tostring(parent)] = "dead" }, seen)
      assert.equal(0, env:stop())
    end)
  end)
end
