-- supersede_spec.lua - on_conflict for unique keys and sequences
-- (docs/queues.md, "Newer replaces older"), on each backend: replace
-- gives a pending job the new push's payload, cancel_running cancels the
-- running one and queues the new push, from the CLI, the Lua module and
-- HTTP-shaped options; two producers racing make one job. The handler
-- records its starts and holds its worker until file "gate" exists.
local jr = require "jr"

local GATED = jr.RECORD .. [[
  return function(job)
    local dir = os.getenv("PWD")
    record("starts", tostring(job.payload.v))
    for _ = 1, 2400 do
      local g = io.open(dir .. "/gate")
      if g then g:close() return end
      os.execute("sleep 0.05")
    end
  end]]

local function push(env, ...)
  local out, err, code = env:cli("push", "sup.w", ...)
  assert.equal(0, code, err)
  local id, what = out:match("^(%d+) (%a+)\n$")
  assert(id, "push printed: " .. out)
  return tonumber(id), what
end

-- The v of job id's payload (the engines print JSON apart).
local function v_of(env, id)
  return tonumber(env:job(id).payload:match('"v":%s*(%d+)'))
end

local function drained(env)
  jr.wait_for(function()
    return env:count_in("queued", "running", "waiting") == 0
  end, 30, "drained")
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " on_conflict:", function()
    local env = jr.test_env(backend)

    local function started(n)
      jr.wait_for(function() return #jr.lines(env.dir .. "/starts") >= n end, 60,
                  n .. " started")
    end

    it("cancel_running cancels a running unique job and queues the new push in its place", function()
      env:config("concurrency = 1")
      env:script("sup.w", GATED)
      local first = push(env, '{"v":1}', "--unique-key", "k", "--on-conflict", "cancel_running")
      env:start()
      started(1)
      -- keep: a duplicate; replace: a running holder is never replaced
      assert.same({ first, "duplicate" }, { push(env, '{"v":2}', "--unique-key", "k") })
      assert.same({ first, "duplicate" },
                  { push(env, '{"v":2}', "--unique-key", "k", "--on-conflict", "replace") })
      -- the queue paused: the new job stays pending until the next push,
      -- however soon the cancelled one frees the runner's one slot
      assert.equal(0, select(3, env:cli("queue", "pause", "default")))
      local id, what = push(env, '{"v":3}', "--unique-key", "k", "--on-conflict", "cancel_running")
      assert.equal("superseded", what)
      assert.is_true(id ~= first)
      -- pending: replaced, as replace does
      assert.same({ id, "replaced" },
                  { push(env, '{"v":4}', "--unique-key", "k", "--on-conflict", "cancel_running") })
      assert.equal(0, select(3, env:cli("queue", "resume", "default")))
      env:wait_state(first, "cancelled", 30)
      started(2)
      assert.same({ "1", "4" }, jr.lines(env.dir .. "/starts"))
      jr.write_file(env.dir .. "/gate", "")
      drained(env)
    end)

    it("replaces a sequence's pending last job and cancels its running one", function()
      env:config("concurrency = 1")
      env:script("sup.w", GATED)
      local q = jr.client(env)
      local head, dup, what = q:push("sup.w", { v = 1 }, { sequence = "s" })
      assert.equal("new", what)
      -- the head has not started: it takes the payload
      local id
      id, dup, what = q:push("sup.w", { v = 2 }, { sequence = "s", on_conflict = "replace" })
      assert.same({ head, true, "replaced" }, { id, dup, what })
      assert.equal(2, v_of(env, head))
      env:start()
      started(1)
      -- the head runs: the push goes behind it, then the next replaces that one
      local second
      second, dup, what = q:push("sup.w", { v = 3 }, { sequence = "s", on_conflict = "replace" })
      assert.equal("new", what)
      assert.same({ second, "replaced" },
                  { push(env, '{"v":4}', "--sequence", "s", "--on-conflict", "replace") })
      assert.equal("waiting", env:job(second).state)
      -- cancel_running: the running head is cancelled, the pending one replaced
      id, dup, what = q:push("sup.w", { v = 5 }, { sequence = "s", on_conflict = "cancel_running" })
      assert.same({ second, "replaced" }, { id, what })
      env:wait_state(head, "cancelled", 30)
      started(2)
      assert.same({ "2", "5" }, jr.lines(env.dir .. "/starts"))
      -- the running one again: cancelled, and the push goes behind it
      local third
      third, dup, what = q:push("sup.w", { v = 6 }, { sequence = "s", on_conflict = "cancel_running" })
      assert.same({ false, "superseded" }, { dup, what })
      env:wait_state(second, "cancelled", 30)
      started(3)
      assert.same({ "2", "5", "6" }, jr.lines(env.dir .. "/starts"))
      jr.write_file(env.dir .. "/gate", "")
      drained(env)
      assert.is_nil(env:job(third))
      q:close()
    end)

    it("refuses a bad on_conflict and one with neither a unique key nor a sequence", function()
      env:config("concurrency = 1")
      env:script("sup.w", GATED)
      local _, err, code = env:cli("push", "sup.w", "--on-conflict", "cancel_running")
      assert.equal(2, code)
      assert.matches("on_conflict needs a unique_key or a sequence", err, 1, true)
      _, err, code = env:cli("push", "sup.w", "--sequence", "s", "--on-conflict", "merge")
      assert.equal(2, code)
      assert.matches("invalid --on-conflict 'merge': expected keep, replace or cancel_running", err, 1, true)
      local q = jr.client(env)
      assert.has_error(function() q:push("sup.w", {}, { sequence = "s", on_conflict = "newest" }) end,
                       "push: option 'on_conflict' must be \"keep\", \"replace\" or \"cancel_running\", got newest")
      q:close()
    end)

    it("6 producers racing with cancel_running on a running job make one job, on a unique key and on a sequence", function()
      env:config("concurrency = 2")
      env:script("sup.w", GATED)
      local ukey = push(env, '{"v":0}', "--unique-key", "k", "--on-conflict", "cancel_running")
      local shead = push(env, '{"v":0}', "--sequence", "s", "--on-conflict", "cancel_running")
      env:start()
      started(2)
      local cmd = ("cd %s && %s -c %s push sup.w"):format(jr.quote(env.dir),
        jr.quote(jr.bin), jr.quote(env.config_file))
      local go, script = env.dir .. "/go", {}
      -- due in an hour: the new job is not claimed while the race runs
      for i = 1, 6 do
        local opt = i % 2 == 0 and "--unique-key k" or "--sequence s"
        script[#script + 1] = ("(while [ ! -e %s ]; do sleep 0.01; done; %s '{\"v\":%d}'" ..
          " %s --on-conflict cancel_running --in 1h > %s/out%d 2>&1) &"):format(
          jr.quote(go), cmd, i, opt, jr.quote(env.dir), i)
      end
      script[#script + 1] = "sleep 0.3; touch " .. jr.quote(go) .. "; wait"
      jr.sh(table.concat(script, "\n"))
      for _, kind in ipairs({ 0, 1 }) do
        local ids, superseded, n = {}, 0, 0
        for i = 1, 6 do
          if i % 2 == kind then
            local out = jr.read_file(("%s/out%d"):format(env.dir, i)) or ""
            local id, what = out:match("^(%d+) (%a+)\n$")
            assert(id, "producer " .. i .. " printed: " .. out)
            ids[id] = true
            n = n + 1
            if what == "superseded" then superseded = superseded + 1
            else assert.equal("replaced", what, out) end
          end
        end
        assert.equal(3, n)
        assert.equal(1, superseded)
        local k = 0
        for _ in pairs(ids) do k = k + 1 end
        assert.equal(1, k)
      end
      env:wait_state(ukey, "cancelled", 30)
      env:wait_state(shead, "cancelled", 30)
      assert.equal(1, #env:jobs("unique_key = 'k'"))
      assert.equal(1, #env:jobs("sequence_key = 's' AND state IN ('queued', 'waiting')"))
      assert.equal(2, #jr.lines(env.dir .. "/starts"))
    end)
  end)
end
