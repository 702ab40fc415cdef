-- waits_chaos_spec.lua - signals and timeouts decided in the database
-- under crashes, on PostgreSQL (several runners share one server): three
-- runners, each killed with SIGKILL now and then and started again, run
-- 150 jobs that each wait for a signal with an 8 s deadline, then sleep
-- durably; two senders signal every job at once, at random moments around
-- the deadlines. Each job ends once, with its payload or its timeout: a
-- signal the database took was delivered to exactly its job, never two
-- (of the two senders at most one succeeds for a job), a job whose wait
-- timed out took no signal, and no job stays waiting past its date
-- (beyond the wake-up's second and a lease lost with a killed runner).
local jr = require "jr"
local cjson = require "cjson"

local JOBS = 150
local HANDLER = [[
  local jobrunner = require "jobrunner"
  return function(job)
    local v, why = jobrunner.wait_signal("go", { timeout = 8 })
    jobrunner.sleep_for(0.5)
    return { n = v and v.n, why = why }
  end]]

local function result_of(env, id)
  local v = env:query("SELECT result FROM jobs WHERE id = " .. id)[1].result
  if type(v) == "string" then v = cjson.decode(v) end
  return v
end

for _, backend in ipairs(jr.backends()) do
  if backend == "postgres" and os.getenv("JR_SKIP_KILLS") ~= "1" then
    describe("postgres: waits under kill -9 of runners", function()
      local env = jr.test_env(backend, { config = "concurrency = 4, lease = 2" })

      it("decides each signal or timeout once; none waits past its date", function()
        env:script("chaos.wait", HANDLER)
        local runners = {}
        for i = 1, 3 do runners[i] = env:start() end
        local ids = {}
        for i = 1, JOBS do ids[i] = env:push("chaos.wait", "{}") end
        -- two senders, each over every job in its own random order, at
        -- moments spread over several seconds: the deadlines fall among them
        for s = 1, 2 do
          local order = {}
          for i = 1, JOBS do order[i] = ids[i] end
          for i = JOBS, 2, -1 do
            local k = math.random(i)
            order[i], order[k] = order[k], order[i]
          end
          local lines = { "set +e" }
          for i, id in ipairs(order) do
            if i % 20 == 1 then lines[#lines + 1] = "sleep 1" end
            lines[#lines + 1] = ("%s -c %s signal %d go '{\"n\":%d}' >/dev/null 2>&1; echo \"%d $?\" >> %s"):format(
              jr.quote(jr.bin), jr.quote(env.config_file), id, id, id,
              jr.quote(env.dir .. "/sent" .. s .. ".log"))
          end
          jr.write_file(env.dir .. "/send" .. s .. ".sh", table.concat(lines, "\n") .. "\n")
          os.execute(("sh %s > /dev/null 2>&1 &"):format(jr.quote(env.dir .. "/send" .. s .. ".sh")))
        end
        -- kill -9 a runner now and then, start it again; look for a job
        -- left waiting past its date meanwhile
        local t0 = jr.now()
        local kills = 0
        -- 20 s, or the ten kills a slow machine takes longer for
        while (jr.now() - t0 < 20 or kills < 10) and jr.now() - t0 < 90 do
          jr.sleep(0.7 + math.random() * 0.6)
          local k = math.random(3)
          env:stop("KILL", runners[k], 20)
          kills = kills + 1
          runners[k] = env:start()
          local late = env:query("SELECT count(*) AS n FROM jobs WHERE state = 'waiting'" ..
            " AND wake_at < now() - interval '6 seconds'")[1].n
          assert.are.equal(0, late)
        end
        assert.is_true(kills >= 10)
        jr.wait_for(function()
          return #jr.lines(env.dir .. "/sent1.log") == JOBS and
                 #jr.lines(env.dir .. "/sent2.log") == JOBS
        end, 120, "both senders done")
        jr.wait_for(function() return env:count("completed") == JOBS end, 120,
          "every job completed")
        local ok = {}
        for s = 1, 2 do
          for _, l in ipairs(jr.lines(env.dir .. "/sent" .. s .. ".log")) do
            local id, code = l:match("^(%d+) (%d+)$")
            id, code = tonumber(id), tonumber(code)
            assert.truthy(code == 0 or code == 2, l)
            if code == 0 then ok[id] = (ok[id] or 0) + 1 end
          end
        end
        local signalled, timed_out = 0, 0
        for _, id in ipairs(ids) do
          local r = result_of(env, id)
          if r.why == "timeout" then
            assert.is_nil(ok[id], "job " .. id .. " timed out, but a signal was taken")
            timed_out = timed_out + 1
          else
            assert.are.equal(1, ok[id], "job " .. id .. ": signals taken")
            assert.are.equal(id, r.n)
            signalled = signalled + 1
          end
        end
        assert.are.equal(JOBS, signalled + timed_out)
        print(("\n  %d kills: %d jobs signalled, %d timed out"):format(kills, signalled, timed_out))
      end)
    end)
  end
end
