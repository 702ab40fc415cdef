-- seq39_red_spec.lua - the red team of priority aging, on_conflict, limits
-- by cost and fair weights from Lua (docs/queues.md, docs/limits.md), on
-- each backend.
local jr = require "jr"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " seq39 red team:", function()
    local env = jr.test_env(backend)

    -- A config that makes a limit smaller than the cost of jobs already
    -- pushed leaves them queued for ever: the push's check was passed
    -- under the old size. They are named at migrate and at start.
    it("warns at migrate and start of jobs whose cost a smaller limit can no longer hold", function()
      env:config([[limits = { ["red.w"] = { concurrency = 10 } }]])
      env:script("red.w", "return function() end")
      assert.equal(0, select(3, env:cli("migrate")))
      local big = env:push("red.w", "{}", "--cost", "8")
      env:push("red.w", "{}", "--cost", "3")
      env:config([[limits = { ["red.w"] = { concurrency = 4 } }]])
      local _, err, code = env:cli("migrate")
      assert.equal(0, code, err)
      local want = ("limit 'red.w': 1 job not started costs more than its concurrency 4 holds " ..
                    "(4 at most; job %d costs 8): it could never start"):format(big)
      assert.matches(want, err, 1, true)
      env:start()
      jr.wait_for(function() return env:count("queued") == 1 end, 30, "the job of cost 3 ran")
      jr.wait_for(function() return env:log():find(want, 1, true) end, 30, "the warning at start")
      assert.equal(big, tonumber(env:jobs("state = 'queued'")[1].id))
    end)

    -- A push's cost is the job's it inserted or replaced: a duplicate
    -- (keep) rewrote the cost of the job it did not replace, and a
    -- replacing push without a cost left the old one's on its payload.
    it("gives a job the cost of the push that inserted or replaced it, never a duplicate's", function()
      env:config([[limits = { ["red.w"] = { concurrency = 10 } }]])
      env:script("red.w", "return function() end")
      assert.equal(0, select(3, env:cli("migrate")))
      local function push(...)
        local out, err, code = env:cli("push", "red.w", ...)
        assert.equal(0, code, err)
        return tonumber(out:match("^(%d+)")), out:match("(%a+)%s*$")
      end
      local function cost(id)
        return tonumber(env:query(("SELECT cost FROM jobs WHERE id = %d"):format(id))[1].cost)
      end
      local d = push('{"v": 1}', "--unique-key", "d", "--cost", "2")
      assert.same({ d, "duplicate" }, { push('{"v": 2}', "--unique-key", "d", "--cost", "9") })
      assert.equal(2, cost(d))
      local k = push('{"v": 1}', "--unique-key", "k", "--cost", "8")
      assert.same({ k, "replaced" }, { push('{"v": 2}', "--unique-key", "k", "--on-conflict", "replace") })
      assert.is_nil(cost(k))
      assert.same({ k, "replaced" }, { push('{"v": 3}', "--unique-key", "k", "--on-conflict", "replace", "--cost", "3") })
      assert.equal(3, cost(k))
      local s = push('{"v": 1}', "--sequence", "s", "--cost", "7", "--in", "1h")
      assert.same({ s, "replaced" }, { push('{"v": 2}', "--sequence", "s", "--on-conflict", "replace") })
      assert.is_nil(cost(s))
    end)
  end)
end
