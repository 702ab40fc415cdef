-- waits_spec.lua - signals and durable sleep (docs/handlers.md, "Signals
-- and durable sleep"), end to end on both backends: a signal sent after
-- the wait makes the job ready and its wait_signal returns the payload; a
-- signal sent before is kept and returned at once; a wait times out
-- (nil, "timeout") and a signal after it is refused; a finished job
-- refuses a signal, a second signal of one name is refused, nothing
-- changed; a signal racing the timeout decides one of them; a date wait
-- holds no worker (another job runs meanwhile) and shows in stats as
-- waiting; sleep_for keeps its date across a retry; coroutine jobs
-- (inflight = 50) wait and are signalled. The wait never counts an
-- attempt.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

-- The handler: records each start in runs.log, waits for the signal
-- named by the payload (or "approved"), then sleeps if asked, fails its
-- first attempt if asked, and returns what the wait gave.
local APPROVAL = jr.RECORD .. [[
  local jobrunner = require "jobrunner"
  return function(job)
    local p = job.payload
    record("runs.log", job.id .. " " .. job.attempt)
    local v, why = jobrunner.wait_signal(p.signal or "approved",
                                         p.timeout and { timeout = p.timeout })
    if p.sleep then jobrunner.sleep_for(p.sleep) end
    return { v = v, why = why }
  end]]

local function result_of(env, id)
  local r = env:query("SELECT result FROM jobs WHERE id = " .. id)[1]
  local v = r and r.result
  if type(v) == "string" then v = cjson.decode(v) end
  return v
end

local function runs(env, id)
  local n = 0
  for _, l in ipairs(jr.lines(env.dir .. "/runs.log")) do
    if l:match("^(%d+) ") == tostring(id) then n = n + 1 end
  end
  return n
end

local function waits_of(env, id)
  local w = env:query("SELECT waits FROM jobs WHERE id = " .. id)[1].waits
  if type(w) == "string" then w = cjson.decode(w) end
  return w
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": signals", function()
    local env = jr.test_env(backend, { config = "concurrency = 1" })

    it("a signal after the wait makes the job ready; its payload comes back, no attempt counted", function()
      env:script("appr", APPROVAL)
      env:start()
      local id = env:push("appr", "{}")
      env:wait_state(id, "waiting")
      local row = env:job(id)
      assert.are.equal(0, row.attempts)
      assert.is_true(row.locked_by == cjson.null or row.locked_by == nil)
      assert.are.equal(1, env:stats().waiting)
      local out, err, code = env:cli("signal", tostring(id), "approved", '{"by":"ada"}')
      assert.are.equal(0, code, err)
      assert.truthy(out:find("delivered: the job is ready", 1, true), out)
      env:wait_state(id, "completed")
      assert.are.same({ v = { by = "ada" } }, result_of(env, id))
      assert.are.equal(1, env:job(id).attempts)
      assert.are.equal(2, runs(env, id))
      -- the job is finished: a signal now is refused, nothing changed
      local before = waits_of(env, id)
      out, err, code = env:cli("signal", tostring(id), "other")
      assert.are.equal(2, code, out)
      assert.truthy(err:find(("signal 'other' to job %d refused: the job is completed (finished)"):format(id), 1, true), err)
      assert.are.same(before, waits_of(env, id))
    end)

    it("a signal sent before the wait is kept and returned at once; a second one is refused", function()
      env:script("appr", APPROVAL)
      local id = env:push("appr", "{}")
      local out, err, code = env:cli("signal", tostring(id), "approved", '[1,2]')
      assert.are.equal(0, code, err)
      assert.truthy(out:find("kept", 1, true), out)
      out, err, code = env:cli("signal", tostring(id), "approved", '{"again":true}')
      assert.are.equal(2, code, out)
      assert.truthy(err:find(("signal 'approved' to job %d refused: it was sent already"):format(id), 1, true), err)
      assert.are.same({ 1, 2 }, waits_of(env, id).signals.approved.payload)
      env:start()
      env:wait_state(id, "completed")
      assert.are.same({ v = { 1, 2 } }, result_of(env, id))
      assert.are.equal(1, runs(env, id))     -- never waited
    end)

    it("a wait times out: nil, 'timeout'; a signal after it is refused", function()
      env:script("appr", APPROVAL)
      env:start()
      local id = env:push("appr", '{"timeout": "1s", "sleep": 60}')
      -- after the timeout the job sleeps (waiting for a date)
      jr.wait_for(function()
        local w = waits_of(env, id)
        return w ~= cjson.null and w and w.sleeps
      end, 30, "the wait's timeout")
      local w = waits_of(env, id)
      assert.is_truthy(w.timeouts.approved)
      assert.are.equal(w.deadlines.approved, w.timeouts.approved)
      local out, err, code = env:cli("signal", tostring(id), "approved")
      assert.are.equal(2, code, out)
      assert.truthy(err:find(("signal 'approved' to job %d refused: its wait for it timed out"):format(id), 1, true), err)
      assert.is_nil(waits_of(env, id).signals)
      assert.are.equal("waiting", env:job(id).state)
      -- the sleep's date is moved to the past by plain SQL: the job ends
      -- with the timeout
      if backend == "postgres" then
        env:exec("UPDATE jobs SET wake_at = now() - interval '1 second', waits = " ..
          "jsonb_set(waits, '{sleeps,1}', to_jsonb(extract(epoch FROM now()) - 1))" ..
          " WHERE id = " .. id)
      else
        env:exec("UPDATE jobs SET wake_at = wake_at - 100, waits = " ..
          "json_set(waits, '$.sleeps.\"1\"', wake_at - 100) WHERE id = " .. id)
      end
      env:wait_state(id, "completed")
      assert.are.same({ why = "timeout" }, result_of(env, id))
    end)

    it("the Lua module's q:signal: false when kept, true when it made the job ready, nil and the refusal", function()
      env:script("appr", APPROVAL)
      local q = jr.client(env)
      local kept = env:push("appr", "{}")
      local ok, err = q:signal(kept, "approved", { list = { 1 } })
      assert.are.equal(false, ok, err)
      local again, why = q:signal(kept, "approved")
      assert.is_nil(again)
      assert.truthy(why:find("it was sent already", 1, true), why)
      env:start()
      env:wait_state(kept, "completed")
      assert.are.same({ v = { list = { 1 } } }, result_of(env, kept))
      local waiting = env:push("appr", "{}")
      env:wait_state(waiting, "waiting")
      assert.are.equal(true, q:signal(waiting, "approved", { n = 2 }))
      env:wait_state(waiting, "completed")
      assert.are.same({ v = { n = 2 } }, result_of(env, waiting))
      local none, msg = q:signal(999999, "approved")
      assert.is_nil(none)
      assert.truthy(msg:find("no such job", 1, true), msg)
      q:close()
    end)

    it("refuses a signal to a dead or unknown job and a bad name or payload", function()
      env:script("boom", "return function() require('jobrunner').discard('no') end")
      env:start()
      local id = env:push("boom")
      env:wait_state(id, "dead")
      local out, err, code = env:cli("signal", tostring(id), "approved")
      assert.are.equal(2, code, out)
      assert.truthy(err:find("the job is dead (finished)", 1, true), err)
      assert.are.equal(cjson.null, env:query("SELECT waits FROM jobs WHERE id = " .. id)[1].waits)
      out, err, code = env:cli("signal", "999999", "approved")
      assert.are.equal(5, code, out)
      assert.truthy(err:find("signal 'approved' to job 999999 refused: no such job", 1, true), err)
      out, err, code = env:cli("signal", tostring(id), "bad name")
      assert.are.equal(2, code, out)
      assert.truthy(err:find("signal name", 1, true), err)
      out, err, code = env:cli("signal", tostring(id), "approved", "{nope")
      assert.are.equal(2, code, out)
      assert.truthy(err:find("payload is not JSON", 1, true), err)
    end)

    it("a signal racing the timeout decides exactly one of them", function()
      env:config("concurrency = 4")
      env:script("appr", APPROVAL)
      env:start()
      local ids = {}
      for i = 1, 12 do ids[i] = env:push("appr", '{"timeout": 2}') end
      -- each waiting, or past its 2 s already on a slow machine (the looks
      -- one job at a time can outlast a job's whole wait)
      for _, id in ipairs(ids) do
        jr.wait_for(function()
          local j = env:job(id)
          return j and (j.state == "waiting" or j.state == "completed")
        end, 30, ("job %d waiting or done"):format(id))
      end
      -- signals sent around the deadlines: each is delivered or refused
      local sent = {}
      local t0 = jr.now()
      for i, id in ipairs(ids) do
        while jr.now() < t0 + 0.15 * i do jr.sleep(0.02) end
        local _, err, code = env:cli("signal", tostring(id), "approved", ('{"n":%d}'):format(i))
        -- refused: timed out, or timed out and ended already
        assert.truthy(code == 0 or err:find("timed out", 1, true) or
                      err:find("(finished)", 1, true), err)
        sent[id] = code == 0 and i or false
      end
      local signalled, timed_out = 0, 0
      for _, id in ipairs(ids) do
        env:wait_state(id, "completed", 30)
        local r = result_of(env, id)
        if sent[id] then
          assert.are.same({ v = { n = sent[id] } }, r)
          signalled = signalled + 1
        else
          assert.are.same({ why = "timeout" }, r)
          timed_out = timed_out + 1
        end
      end
      assert.are.equal(12, signalled + timed_out)
    end)
  end)

  describe(backend .. ": POST /api/jobs/ID/signal", function()
    local env = jr.test_env(backend)

    it("needs the token, checks its body, refuses as the CLI does, makes a waiting job ready", function()
      env:script("appr", APPROVAL)
      local base = H.start(env, "concurrency = 1")
      local id = env:push("appr", "{}")
      env:wait_state(id, "waiting")
      -- a second job, signalled before it runs, then sleeping: /metrics
      -- counts one job waiting on a signal and one on a date
      local sleeper = env:push("appr", '{"sleep": 600}')
      assert.are.equal(0, select(3, env:cli("signal", tostring(sleeper), "approved")))
      jr.wait_for(function()
        local w = waits_of(env, sleeper)
        return w ~= cjson.null and w and w.sleeps
      end, 30, "the second job's sleep")
      local mcode, metrics = H.req(base .. "/metrics", { token = true })
      assert.are.equal(200, mcode, metrics)
      assert.truthy(metrics:find('jobrunner_jobs_waiting{on="signal"} 1\n', 1, true), metrics)
      assert.truthy(metrics:find('jobrunner_jobs_waiting{on="date"} 1\n', 1, true), metrics)
      local url = ("%s/api/jobs/%d/signal"):format(base, id)
      local body = '{"name": "approved", "payload": {"by": "http"}}'
      assert.are.equal(401, (H.req(url, { body = body })))
      local code, text = H.req(url, { body = '{"name": "bad name"}', token = true })
      assert.are.equal(400, code, text)
      assert.truthy(text:find("signal name", 1, true), text)
      code, text = H.req(url, { body = '{"nom": "approved"}', token = true })
      assert.are.equal(400, code, text)
      assert.truthy(text:find("unknown key 'nom'", 1, true), text)
      code, text = H.req(base .. "/api/jobs/999999/signal", { body = body, token = true })
      assert.are.equal(404, code, text)
      assert.are.equal("waiting", env:job(id).state)
      code, text = H.req(url, { body = body, token = true })
      assert.are.equal(200, code, text)
      local r = cjson.decode(text)
      assert.are.same({ id = id, signal = "approved", outcome = "ready", state = "queued" }, r)
      env:wait_state(id, "completed")
      assert.are.same({ v = { by = "http" } }, result_of(env, id))
      code, text = H.req(url, { body = body, token = true })
      assert.are.equal(409, code, text)
      assert.truthy(text:find("the job is completed (finished)", 1, true), text)
    end)
  end)

  describe(backend .. ": durable sleep", function()
    local env = jr.test_env(backend, { config = "concurrency = 1" })

    it("a date wait of 2 s holds no worker: another job runs meanwhile", function()
      env:script("sleeper", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return function(job)
          record("runs.log", job.id .. " " .. job.attempt)
          jobrunner.sleep_for(2)
          record("done.log", tostring(jobrunner.now()))
          return true
        end]])
      env:script("quick", jr.RECORD .. [[
        return function() record("quick.log", "ran") end]])
      env:start()
      local t0 = jr.now()
      local id = env:push("sleeper")
      env:wait_state(id, "waiting")
      local s = env:stats()
      assert.are.equal(1, s.waiting)
      assert.are.equal(0, s.running)
      -- the one worker is free: a second job runs while the first waits
      env:push("quick")
      jr.wait_file(env.dir .. "/quick.log", 20)
      assert.are.equal("waiting", env:job(id).state)
      env:wait_state(id, "completed", 30)
      local done = tonumber(jr.wait_file(env.dir .. "/done.log"))
      assert.is_true(done - t0 >= 2, "slept " .. (done - t0))
      assert.are.equal(2, runs(env, id))
      assert.are.equal(1, env:job(id).attempts)
    end)

    it("sleep_for keeps its date across a retry: the hour does not restart", function()
      env:script("retrier", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return {
          backoff = 0,
          handle = function(job)
            record("runs.log", job.id .. " " .. job.attempt)
            jobrunner.sleep_for(job.payload.secs)
            if job.attempt == 1 then error("first attempt fails") end
            return { attempt = job.attempt }
          end,
        }]])
      env:start()
      local id = env:push("retrier", '{"secs": 3}')
      env:wait_state(id, "waiting")
      local wake = waits_of(env, id).sleeps["1"]
      env:wait_state(id, "completed", 40)
      assert.are.same({ attempt = 2 }, result_of(env, id))
      -- the second attempt returned from its sleep at once: one wait in
      -- all (3 starts: the wait, the failure, the success) and the same
      -- recorded date
      assert.are.equal(3, runs(env, id))
      assert.are.equal(wake, waits_of(env, id).sleeps["1"])
    end)

    it("sleep_until a past time returns at once; bad arguments are errors naming the call", function()
      env:script("past", [[
        local jobrunner = require "jobrunner"
        return function(job)
          jobrunner.sleep_until(jobrunner.now() - 10)
          local ok, err = pcall(jobrunner.wait_signal, "x", { timeout = "soon" })
          local ok2, err2 = pcall(jobrunner.sleep_for, -1)
          return { err = err, err2 = err2 }
        end]])
      env:start()
      local id = env:push("past")
      env:wait_state(id, "completed")
      local r = result_of(env, id)
      assert.truthy(r.err:find("jobrunner.wait_signal: invalid timeout 'soon'", 1, true), r.err)
      assert.truthy(r.err2:find("sleep_for", 1, true), r.err2)
    end)
  end)

  describe(backend .. ": waits in coroutine jobs", function()
    local env = jr.test_env(backend, { config = "concurrency = 1" })

    it("inflight = 50: every job waits, every signal is delivered once", function()
      env:script("co", [[
        local jobrunner = require "jobrunner"
        return {
          inflight = 50,
          handle = function(job)
            jobrunner.sleep(0.01)
            local v = jobrunner.wait_signal("go")
            jobrunner.sleep_for(1)
            return { n = v.n }
          end,
        }]])
      env:start()
      local ids = {}
      for i = 1, 60 do ids[i] = env:push("co") end
      jr.wait_for(function() return env:count("waiting") == 60 end, 60, "60 waiting")
      for i, id in ipairs(ids) do
        local _, err, code = env:cli("signal", tostring(id), "go", ('{"n":%d}'):format(i))
        assert.are.equal(0, code, err)
      end
      for i, id in ipairs(ids) do
        env:wait_state(id, "completed", 60)
        assert.are.same({ n = i }, result_of(env, id))
        assert.are.equal(1, env:job(id).attempts)
      end
    end)
  end)
end

describe("examples/approval", function()
  it("runs: two expenses wait for a decision, are signalled, one is paid after a durable sleep", function()
    local dir = jr.sh("mktemp -d /tmp/jrapproval.XXXXXX"):gsub("%s+$", "")
    local out, err, code = jr.sh(("JOBRUNNER=%s timeout 120 %s/examples/approval/run.sh %s"):format(
      jr.quote(jr.bin), jr.quote(jr.root), jr.quote(dir)))
    os.execute("rm -rf " .. jr.quote(dir))
    assert.are.equal(0, code, out .. err)
    assert.truthy(out:find("waiting_for   signal 'decision' until", 1, true), out)
    assert.truthy(out:find("expense 1: 120 paid, approved by ada", 1, true), out)
    assert.truthy(out:find('"outcome":"refused"', 1, true), out)
  end)
end)
