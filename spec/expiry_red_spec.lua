-- expiry_red_spec.lua - what expiry must not do (docs/queues.md, "Expiry
-- and deadlines", "What counts as started"), on each backend: a job whose
-- handler ran once is never expired, though its attempt was not counted
-- (a snooze, a wait for a signal, a cursor handed back at a stop) and
-- the expiry passed meanwhile; it runs on. A rerun of a job that ran
-- runs, its old expiry passed or not. A time written as 0 (@0,
-- 1970-01-01T00:00:00Z) is refused, not taken as no expiry. On
-- PostgreSQL a claim under limits that waited for the limits' lock
-- tests expiry at its statement's time, not at its transaction's start.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

-- records each start as "NAME ID", then what the handler's name says
local HANDLER = [[
local jobrunner = require "jobrunner"
local function record(line)
  local f = assert(io.open(%q, "a"))
  f:write(line, "\n")
  f:close()
end
return { max_retries = 0, handle = function(job)
  record("%s " .. job.id)
  %s
end }
]]

local function lines_of(path)
  local t = {}
  for _, l in ipairs(jr.lines(path)) do t[l] = (t[l] or 0) + 1 end
  return t
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " expiry (red team):", function()
    local env = jr.test_env(backend)

    it("never expires a job whose handler ran, when a snooze or a wait outlasts its expiry", function()
      local log = env.dir .. "/starts"
      -- snoozes past its expiry once, then succeeds
      env:script("snz", HANDLER:format(log, "snz", [[
        local f = io.open(]] .. ("%q"):format(env.dir .. "/snoozed") .. [[, "r")
        if f == nil then
          f = assert(io.open(]] .. ("%q"):format(env.dir .. "/snoozed") .. [[, "w"))
          f:close()
          return jobrunner.snooze(4)
        end
        f:close()
        record("snz-done " .. job.id)]]))
      -- waits for a signal that never comes, past its expiry
      env:script("wt", HANDLER:format(log, "wt", [[
        local _, why = jobrunner.wait_signal("go", { timeout = 4 })
        record("wt-done " .. job.id .. " " .. tostring(why))]]))
      -- (expiries far enough for a runner's start under the sanitizers on
      -- a loaded machine: a job never run expires instead; the snooze and
      -- the wait longer than them)
      local s = env:push("snz", nil, "--expires-in", "3")
      local w = env:push("wt", nil, "--expires-in", "3")
      env:start()
      jr.wait_for(function()
        local t = lines_of(log)
        return t["snz-done " .. s] and t["wt-done " .. w .. " timeout"]
      end, 30, "the snoozed and the waiting job ran on past their expiry")
      local t = lines_of(log)
      assert.equal(2, t["snz " .. s])
      assert.equal(2, t["wt " .. w])
      -- the handler writes its line before it returns: wait for the end
      jr.wait_for(function() return env:job(s) == nil and env:job(w) == nil end,
        30, "the two jobs' ends recorded")
      assert.equal(0, env:stats().expired)
      env:stop()
    end)

    it("never expires a job whose cursor was handed back at a stop", function()
      local log = env.dir .. "/starts"
      local go = env.dir .. "/go"
      -- a step that checkpoints until the file go exists
      env:script("cur", HANDLER:format(log, "cur", [[
        jobrunner.step("walk", function(cursor)
          while true do
            local f = io.open(]] .. ("%q"):format(go) .. [[, "r")
            if f then f:close() return "done" end
            jobrunner.checkpoint((cursor or 0) + 1)
            os.execute("sleep 0.1")
          end
        end)
        record("cur-done " .. job.id)]]))
      local t0 = jr.now()
      local id = env:push("cur", nil, "--expires-in", "4")
      env:start()
      jr.wait_for(function() return lines_of(log)["cur " .. id] end, 20, "the job started")
      env:stop()
      local row = env:job(id)
      assert.equal("queued", row.state)
      -- its expiry passes while no runner runs
      jr.sleep(math.max(0, t0 + 4.5 - jr.now()))
      jr.write_file(go, "")
      env:start()
      jr.wait_for(function() return lines_of(log)["cur-done " .. id] end, 30,
                  "the job handed back ran on past its expiry")
      assert.equal(0, env:stats().expired)
      env:stop()
    end)

    it("runs a rerun of a job that ran, its expiry passed", function()
      local log = env.dir .. "/starts"
      env:script("bad", HANDLER:format(log, "bad", [[error("boom")]]))
      -- (its expiry far enough for a runner's start under the sanitizers
      -- on a loaded machine: a job never run expires instead)
      local t0 = jr.now()
      local id = env:push("bad", nil, "--expires-in", "4")
      env:start()
      env:wait_state(id, "dead", 20)
      jr.sleep(math.max(0, t0 + 4.5 - jr.now()))
      local out, err, code = env:cli("rerun", tostring(math.tointeger(id)))
      assert.equal(0, code, out .. err)
      jr.wait_for(function() return lines_of(log)["bad " .. id] == 2 end, 20,
                  "the rerun job ran")
      env:wait_state(id, "dead", 20)
      assert.equal(0, env:stats().expired)
      env:stop()
    end)

    it("refuses an expiry time of 0, which would be no expiry at all", function()
      env:script("rec", HANDLER:format(env.dir .. "/starts", "rec", ""))
      for _, t in ipairs({ "@0", "1970-01-01T00:00:00Z" }) do
        local out, err, code = env:cli("push", "rec", "--expires-at", t)
        assert.are_not.equal(0, code, out)
        assert.matches("invalid --expires-at '" .. t .. "': a time after", err, 1, true)
      end
      local base = H.start(env)
      local code, body = H.req(base .. "/api/jobs", { token = true,
        body = cjson.encode({ name = "rec", expires_at = "1970-01-01T00:00:00Z" }) })
      assert.equal(400, code, body)
      assert.matches("expires_at", body, 1, true)
      assert.equal(0, env:count())
      env:stop()
    end)

    if backend == "postgres" then
      it("does not start a job that expired while its claim waited for the limits' lock", function()
        local pghold = require "pghold"
        local log = env.dir .. "/starts"
        env:config("limits = { rec = { concurrency = 5 } }")
        env:script("rec", HANDLER:format(log, "rec", ""))
        env:cli("migrate")
        local id = env:push("rec", nil, "--expires-in", "8")
        -- the lock held until well past the expiry, once the claim waits
        local hold = pghold.start(env,
          { ("SELECT pg_advisory_xact_lock(hashtext('jobrunner.limits:%s'))"):format(env.schema) },
          { "SELECT pg_sleep(10)" })
        env:start()
        local code, err = pghold.finish(hold)
        assert.equal(0, code, err)
        env:wait_state(id, "expired", 30)
        assert.is_nil(lines_of(log)["rec " .. id], "the job started past its expiry")
        env:stop()
      end)
    end
  end)
end
