-- workflows_spec.lua - dependencies, flows and batches (docs/workflows.md)
-- on each backend: a diamond runs in order and its last job sees both
-- results; a parent that dies decides its child by on_parent_failure;
-- flows with a cycle or an unknown ref push nothing; a batch of 1,000
-- fires on_success and on_complete once each; a member adds to its own
-- batch; cancel --batch; waiting jobs are never claimed.
local jr = require "jr"
local cjson = require "cjson"

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

-- A handler that records "name payload.n parents" as one JSON line and
-- returns { v = payload.n }.
local STEP = jr.RECORD .. [[
  local cjson = require "cjson"
  return { max_retries = 0, handle = function(job)
    local parents = {}
    for id, p in pairs(job.parents or {}) do
      parents[tostring(id)] = { state = p.state, result = p.result }
    end
    record("ledger", cjson.encode({ n = job.payload.n, id = job.id,
      parents = parents, batch = job.batch }))
    if job.payload.fail then error("told to fail") end
    return { v = job.payload.n }
  end }]]

local CALLBACK = jr.RECORD .. [[
  local cjson = require "cjson"
  return function(job)
    record("callbacks", cjson.encode({ name = job.name, payload = job.payload }))
  end]]

-- cjson decodes numbers as floats: ids as the CLI and the keys write them
local function key(id) return tostring(math.tointeger(id)) end

local function ledger(env, file)
  local t = {}
  for _, l in ipairs(jr.lines(env.dir .. "/" .. (file or "ledger"))) do
    t[#t + 1] = cjson.decode(l)
  end
  return t
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " workflows:", function()
    local env = jr.test_env(backend)

    it("runs a diamond in order and the last job sees both results", function()
      env:script("step", STEP)
      write(env.dir .. "/flow.json", [[{"jobs": [
        {"ref": "d", "name": "step", "payload": {"n": "d"}, "after": ["b", "c"]},
        {"ref": "b", "name": "step", "payload": {"n": "b"}, "after": ["a"]},
        {"ref": "c", "name": "step", "payload": {"n": "c"}, "after": ["a"]},
        {"ref": "a", "name": "step", "payload": {"n": "a"}}]}]])
      local out, err, code = env:cli("push-flow", "--json", env.dir .. "/flow.json")
      assert.equal(0, code, err)
      local ids = cjson.decode(out).ids
      assert.equal("queued", env:job(ids.a).state)
      for _, r in ipairs({ "b", "c", "d" }) do
        assert.equal("waiting", env:job(ids[r]).state)
      end
      env:start()
      jr.wait_for(function() return #ledger(env) == 4 end, 20, "four steps")
      local got = ledger(env)
      local at = {}
      for i, e in ipairs(got) do at[e.n] = i end
      assert.is_true(at.a < at.b and at.a < at.c and at.b < at.d and at.c < at.d)
      local d = got[at.d]
      assert.same({ state = "completed", result = { v = "b" } }, d.parents[key(ids.b)])
      assert.same({ state = "completed", result = { v = "c" } }, d.parents[key(ids.c)])
      assert.same({ state = "completed", result = { v = "a" } },
        got[at.b].parents[key(ids.a)])
      -- show names the links
      out = env:cli("show", key(ids.d), "--json")
      local shown = cjson.decode(out)
      assert.equal(2, #shown.parents)
      assert.equal(cjson.null, shown.batch)
      assert.equal(0, env:stop())
    end)

    for _, case in ipairs({
      { opf = "cancel", state = "cancelled", ran = false },
      { opf = "run", state = nil, ran = true },
      { opf = "dead", state = "dead", ran = false },
    }) do
      it("decides a child by on_parent_failure " .. case.opf .. " when its parent dies", function()
        env:script("step", STEP)
        local parent = env:push("step", '{"n":"p","fail":true}')
        local child = env:push("step", '{"n":"c"}', "--after", tostring(parent),
          "--on-parent-failure", case.opf)
        local grandchild = env:push("step", '{"n":"g"}', "--after", tostring(child))
        assert.equal("waiting", env:job(child).state)
        env:start()
        env:wait_state(parent, "dead")
        if case.ran then
          jr.wait_for(function() return #ledger(env) == 3 end, 20, "child and grandchild ran")
          local c = ledger(env)[2]
          assert.equal("c", c.n)
          assert.equal("dead", c.parents[tostring(parent)].state)
        else
          local row = env:wait_state(child, case.state)
          assert.truthy(row.last_error:find("parent " .. parent .. " ended dead", 1, true))
          -- the grandchild goes the same way (its own default: cancel)
          env:wait_state(grandchild, "cancelled")
          jr.sleep(0.3)
          assert.equal(1, #ledger(env))
        end
        assert.equal(0, env:stop())
      end)
    end

    it("refuses a flow with a cycle or an unknown ref and pushes nothing", function()
      write(env.dir .. "/cycle.json", [[[{"ref":"a","name":"step","after":["c"]},
        {"ref":"b","name":"step","after":["a"]},
        {"ref":"c","name":"step","after":["b"]},
        {"ref":"x","name":"step"}] ]])
      local _, err, code = env:cli("push-flow", env.dir .. "/cycle.json")
      assert.not_equal(0, code)
      assert.truthy(err:find("cycle", 1, true), err)
      assert.truthy(err:find("a -> c -> b -> a", 1, true) or
        err:find("c -> b -> a -> c", 1, true) or
        err:find("b -> a -> c -> b", 1, true), err)
      write(env.dir .. "/unknown.json", [[{"jobs":[{"ref":"a","name":"step"},
        {"ref":"b","name":"step","after":["a","nope"]}]}]])
      _, err, code = env:cli("push-flow", env.dir .. "/unknown.json")
      assert.not_equal(0, code)
      assert.truthy(err:find("job 'b': after: unknown job 'nope'", 1, true), err)
      -- an unknown parent id is refused naming it, in the same transaction
      write(env.dir .. "/badid.json", [[[{"ref":"a","name":"step"},
        {"ref":"b","name":"step","after":["a", 987654]}] ]])
      _, err, code = env:cli("push-flow", env.dir .. "/badid.json")
      assert.not_equal(0, code)
      assert.truthy(err:find("unknown parent id 987654", 1, true), err)
      _, err, code = env:cli("push", "step", "--after", "987654")
      assert.not_equal(0, code)
      assert.truthy(err:find("unknown parent id 987654", 1, true), err)
      assert.equal(0, env:count())
    end)

    it("fires on_success and on_complete once each for a batch of 1,000", function()
      env:script("member", "return function(job) return job.payload.i end")
      env:script("cb", CALLBACK)
      local jobs = {}
      for i = 1, 1000 do
        jobs[i] = { ref = "m" .. i, name = "member", payload = { i = i } }
      end
      write(env.dir .. "/batch.json", cjson.encode({ jobs = jobs, batch = {
        on_success = "cb", on_complete = "cb", payload = { tag = "t" } } }))
      local out, err, code = env:cli("push-flow", "--json", env.dir .. "/batch.json")
      assert.equal(0, code, err)
      local batch = cjson.decode(out).batch
      env:config("concurrency = 4")
      env:start()
      -- two runners race for the last member on PostgreSQL (SQLite: one
      -- runner a database)
      if backend == "postgres" then env:start() end
      jr.wait_for(function() return #ledger(env, "callbacks") >= 2 end, 60, "callbacks")
      jr.sleep(0.5)
      local cbs = ledger(env, "callbacks")
      assert.equal(2, #cbs)
      for _, c in ipairs(cbs) do
        assert.equal(batch, c.payload.batch)
        assert.equal(1000, c.payload.counts.completed)
        assert.equal(0, c.payload.counts.dead)
        assert.equal(1000, #c.payload.members)
        assert.equal("t", c.payload.payload.tag)
      end
      out = env:cli("batch", "show", key(batch), "--json")
      local b = cjson.decode(out)
      assert.is_true(b.done)
      assert.equal(1000, b.counts.completed)
      assert.equal(2, #b.callbacks)
      for _, p in ipairs(env.procs) do
        assert.equal(0, env:stop(nil, p), env:log(p))
      end
    end)

    it("fires on_complete but not on_success when a member dies", function()
      env:script("step", STEP)
      env:script("cb", CALLBACK)
      write(env.dir .. "/b.json", [[{"jobs":[{"name":"step","ref":"ok","payload":{"n":1}},
        {"name":"step","ref":"bad","payload":{"n":2,"fail":true}}],
        "batch":{"on_complete":"cb","on_success":"cb"}}]])
      local _, err, code = env:cli("push-flow", env.dir .. "/b.json")
      assert.equal(0, code, err)
      env:start()
      jr.wait_for(function() return #ledger(env, "callbacks") >= 1 end, 20, "callback")
      jr.sleep(0.5)
      local cbs = ledger(env, "callbacks")
      assert.equal(1, #cbs)
      assert.equal(1, cbs[1].payload.counts.completed)
      assert.equal(1, cbs[1].payload.counts.dead)
      assert.equal(0, env:stop())
    end)

    it("lets a member add to its own batch before it ends", function()
      env:script("member", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return function(job)
          if job.payload.first then
            jobrunner.push("member", { later = true }, { batch = job.batch })
          end
          record("members", tostring(job.batch))
        end]])
      env:script("cb", CALLBACK)
      write(env.dir .. "/b.json", [[{"jobs":[{"name":"member","payload":{"first":true}}],
        "batch":{"on_complete":"cb"}}]])
      local _, err, code = env:cli("push-flow", env.dir .. "/b.json")
      assert.equal(0, code, err)
      env:start()
      jr.wait_for(function() return #ledger(env, "callbacks") >= 1 end, 20, "callback")
      jr.sleep(0.3)
      assert.equal(2, #jr.lines(env.dir .. "/members"))
      local cbs = ledger(env, "callbacks")
      assert.equal(1, #cbs)
      assert.equal(2, cbs[1].payload.counts.completed)
      assert.equal(2, #cbs[1].payload.members)
      assert.equal(0, env:stop())
    end)

    it("cancels a batch's members that have not ended, and fires on_complete", function()
      env:script("cb", CALLBACK)
      env:script("step", STEP)
      -- members wait for a job no handler takes: they never start
      local blocker = env:push("nobody.handles")
      write(env.dir .. "/b.json", ([[{"jobs":[
        {"name":"step","ref":"x","after":[%d]},{"name":"step","ref":"y","after":[%d]}],
        "batch":{"on_complete":"cb","on_success":"cb"}}]]):format(blocker, blocker))
      local out, err, code = env:cli("push-flow", "--json", env.dir .. "/b.json")
      assert.equal(0, code, err)
      local batch = cjson.decode(out).batch
      env:start()
      jr.sleep(0.5)
      assert.equal(0, #ledger(env))          -- waiting jobs are never claimed
      out, err, code = env:cli("cancel", "--batch", key(batch))
      assert.equal(0, code, err)
      assert.truthy(out:find("2 cancelled", 1, true), out)
      jr.wait_for(function() return #ledger(env, "callbacks") >= 1 end, 20, "callback")
      jr.sleep(0.3)
      local cbs = ledger(env, "callbacks")
      assert.equal(1, #cbs)
      assert.equal(2, cbs[1].payload.counts.cancelled)
      assert.equal("queued", env:job(blocker).state)
      assert.equal(0, env:stop())
    end)

    it("prunes the edges of ended children and batches as old as retention.cancelled", function()
      env:script("step", "return function() end")  -- no result: deleted
      env:script("cb", CALLBACK)
      env:config('retention = { cancelled = "1s" }')
      write(env.dir .. "/f.json", [[{"jobs":[{"ref":"a","name":"step","payload":{"n":1}},
        {"ref":"b","name":"step","payload":{"n":2},"after":["a"]}],
        "batch":{"on_complete":"cb"}}]])
      local _, err, code = env:cli("push-flow", env.dir .. "/f.json")
      assert.equal(0, code, err)
      assert.equal(1, #env:query("SELECT 1 AS x FROM job_deps"))
      env:start()
      jr.wait_for(function() return #ledger(env, "callbacks") == 1 end, 20, "callback")
      jr.wait_for(function()
        return #env:query("SELECT 1 AS x FROM job_deps") == 0 and
               #env:query("SELECT 1 AS x FROM batches") == 0 and
               #env:query("SELECT 1 AS x FROM batch_jobs") == 0
      end, 30, "workflow rows pruned")
      assert.equal(0, env:stop())
    end)

    it("pushes from the Lua module: q:flow, q:batch and q:push with after", function()
      env:script("step", STEP)
      env:script("cb", CALLBACK)
      local q = jr.client(env)
      local ids, batch = q:flow({ jobs = {
        { ref = "a", name = "step", payload = { n = "a" } },
        { ref = "b", name = "step", payload = { n = "b" }, after = { "a" } } } })
      assert.is_nil(batch)
      local c = assert(q:push("step", { n = "c" }, { after = { ids.b } }))
      assert.equal("waiting", env:job(c).state)
      local bid, members = q:batch(function(b)
        b:push("step", { n = "x" })
        b:push("step", { n = "y" })
      end, { on_complete = "cb" })
      assert.equal(2, #members)
      local nilv, msg = q:push("step", {}, { after = { 99999999 } })
      assert.is_nil(nilv)
      assert.truthy(msg:find("unknown parent id 99999999", 1, true), msg)
      q:close()
      env:start()
      jr.wait_for(function() return #ledger(env, "callbacks") >= 1 end, 20, "callback")
      jr.wait_for(function() return #ledger(env) == 5 end, 20, "five steps")
      assert.equal(bid, ledger(env, "callbacks")[1].payload.batch)
      assert.equal(0, env:stop())
    end)
  end)
end
