-- lifecycle_spec.lua - a job's life on each backend, end to end: the real
-- runner, real workers, a real database.
local jr = require "jr"
local cjson = require "cjson"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " lifecycle:", function()
    local env = jr.test_env(backend, { config = "concurrency = 2" })

    it("runs a job with its payload and deletes it on success", function()
      env:script("hello", [[
        return function(job)
          local f = assert(io.open(os.getenv("PWD") .. "/seen", "a"))
          f:write(job.id, " ", job.name, " ", job.payload.name, " ",
                  job.attempt, " ", job.queue, "\n")
          f:close()
          print("hello, " .. job.payload.name)
        end]])
      env:start()
      local id = env:push("hello", '{"name":"world"}')
      jr.wait_file(env.dir .. "/seen")
      assert.equal(("%d hello world 1 default\n"):format(id), jr.read_file(env.dir .. "/seen"))
      jr.wait_for(function() return env:count() == 0 end)
      jr.wait_for(function() return env:log():find("output: hello, world", 1, true) end)
      assert.equal(0, env:stop())
    end)

    it("retries a failure later with the error kept, then succeeds", function()
      env:script("flaky", [[
        return {
          backoff = 0.2,
          handle = function(job)
            if job.attempt < 3 then error("boom " .. job.attempt) end
          end,
        }]])
      env:start()
      local id = env:push("flaky")
      local row = jr.wait_for(function()
        local r = env:job(id)
        return r and r.state == "queued" and r.attempts >= 1 and r
      end)
      -- a loaded machine may poll after the second attempt: the error kept
      -- is the one of the attempt the row counts
      assert.matches(("flaky.lua:4: boom %d"):format(row.attempts), row.last_error, 1, true)
      jr.wait_for(function() return env:count() == 0 end)
      assert.equal(0, env:stop())
    end)

    it("schedules a retry with the default backoff after a failure", function()
      env:script("fails", "return function() error('nope') end")
      env:start()
      local id = env:push("fails")
      local row = jr.wait_for(function()
        local r = env:job(id)
        return r and r.state == "queued" and r.attempts == 1 and r
      end)
      -- attempt^4 + 15 s at least
      assert.is_true(row.run_at - row.db_now >= 10)
      assert.matches("nope", row.last_error)
      assert.is_true(row.locked_by == nil or row.locked_by == cjson.null,
        "a requeued job keeps no lock: " .. tostring(row.locked_by))
    end)

    it("moves a job to the dead queue after max_retries, keeping its last error", function()
      env:script("always", [[
        return { max_retries = 2, backoff = 0,
                 handle = function(job) error("failure " .. job.attempt) end }]])
      env:start()
      local id = env:push("always")
      local row = jr.wait_for(function()
        local r = env:job(id)
        return r and r.state == "dead" and r
      end)
      assert.equal(3, row.attempts)
      assert.matches("failure 3", row.last_error)
      assert.is_number(row.died_at)
      local out = env:cli("dead", "list", "--json")
      local dead = require("cjson").decode(out)
      assert.equal(1, #dead)
      assert.equal(id, dead[1].id)
      assert.equal("always", dead[1].name)
      assert.equal(3, dead[1].attempts)
      assert.matches("failure 3", dead[1].last_error)
      assert.is_string(dead[1].died_at)
    end)

    it("takes max_retries from the job before the handler", function()
      env:script("always", [[
        return { max_retries = 5, backoff = 0,
                 handle = function() error("x") end }]])
      env:start()
      local id = env:push("always", "{}", "--max-retries", "0")
      jr.wait_for(function()
        local r = env:job(id)
        return r and r.state == "dead" and r.attempts == 1
      end)
    end)

    it("discards a job straight to the dead queue", function()
      env:script("bad", [[
        local jobrunner = require "jobrunner"
        return function() jobrunner.discard("not worth retrying") end]])
      env:start()
      local id = env:push("bad")
      local row = jr.wait_for(function()
        local r = env:job(id)
        return r and r.state == "dead" and r
      end)
      assert.equal(1, row.attempts)
      assert.equal("not worth retrying", row.last_error)
    end)

    it("snoozes a job without counting the attempt", function()
      env:script("later", [[
        local jobrunner = require "jobrunner"
        return function(job)
          if job.attempt == 1 and not job.payload.again then
            jobrunner.snooze(3600)
          end
        end]])
      env:start()
      local id = env:push("later")
      local row = jr.wait_for(function()
        local r = env:job(id)
        return r and r.state == "queued" and r.run_at - r.db_now > 3000 and r
      end)
      assert.equal(0, row.attempts)
    end)

    it("commits follow-up jobs only when the job succeeds", function()
      env:script("parent", [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          jobrunner.push("child", { from = job.id }, { priority = 3, queue = "q2" })
          if job.payload.fail then error("parent failed") end
        end }]])
      env:script("child", [[
        return function(job)
          local f = assert(io.open(os.getenv("PWD") .. "/children", "a"))
          f:write(job.payload.from, " ", job.priority, " ", job.queue, "\n")
          f:close()
        end]])
      env:start()
      local ok_id = env:push("parent", '{"fail":false}')
      local bad_id = env:push("parent", '{"fail":true}')
      jr.wait_for(function()
        local r = env:job(bad_id)
        return r and r.state == "dead"
      end)
      jr.wait_file(env.dir .. "/children")
      jr.wait_for(function() return env:count() == 1 end)
      assert.equal(ok_id .. " 3 q2\n", jr.read_file(env.dir .. "/children"))
    end)

    it("never claims a job whose name has no handler, and stats show it", function()
      env:script("known", "return function() end")
      env:start()
      local id = env:push("unknown.job", '{"x":1}')
      env:push("known")
      jr.wait_for(function() return env:count() == 1 end)
      local s = env:stats()
      assert.equal(1, s.queued)
      assert.equal(0, s.running)
      assert.same({ "unknown.job" }, s.unhandled)
      local row = env:job(id)
      assert.equal("queued", row.state)
      assert.equal(0, row.attempts)
    end)

    it("runs nested handlers and helpers from scripts/", function()
      env:script("_util", "return { twice = function(x) return 2 * x end }")
      env:script("report.daily", [[
        local util = require "_util"
        return function(job)
          local f = assert(io.open(os.getenv("PWD") .. "/out", "w"))
          f:write(util.twice(job.payload.n))
          f:close()
        end]])
      env:start()
      env:push("report.daily", '{"n":21}')
      jr.wait_for(function() return jr.read_file(env.dir .. "/out") == "42" end)
    end)

    it("runs higher priority (lower number) first", function()
      env:config("concurrency = 1")
      env:script("rec", [[
        return function(job)
          local f = assert(io.open(os.getenv("PWD") .. "/order", "a"))
          f:write(job.payload.n, "\n")
          f:close()
        end]])
      env:push("rec", '{"n":1}', "--priority", "5")
      env:push("rec", '{"n":2}', "--priority", "-1")
      env:push("rec", '{"n":3}', "--priority", "0")
      env:start()
      jr.wait_for(function() return env:count() == 0 end)
      assert.equal("2\n3\n1\n", jr.read_file(env.dir .. "/order"))
    end)

    it("runs a job pushed --in the future only when due", function()
      env:script("t", "return function() end")
      env:start()
      local id = env:push("t", "{}", "--in", "3s")
      local row = env:job(id)
      -- still ahead of the database's clock: not run before it is due
      -- (3 s leaves room for a loaded machine between push and read)
      assert.is_true(row.run_at - row.db_now > 0)
      assert.equal("queued", row.state)
      jr.wait_for(function() return env:count() == 0 end, 10)
    end)

    -- A worker sent several quick jobs at once holds their results for
    -- company; a long job behind them kept them unwritten until its end,
    -- and the runner counted the finished jobs as running. The results
    -- now go out before a job whose handler has not run here yet or is
    -- slow.
    it("records quick jobs done before a long job behind them ends", function()
      env:config("concurrency = 1")
      env:script("quick", "return function() end")
      env:script("slow", jr.RECORD .. [[
        return function(job)
          record("slow", "started")
          os.execute("sleep 6")
          record("slow", "done")
        end]])
      env:start()
      -- pushed while the queue is paused, so that the runner sends the
      -- worker several jobs at once
      local function batch(quick, slow)
        local _, err, code = env:cli("queue", "pause", "default")
        assert.equal(0, code, err)
        for _ = 1, quick do env:push("quick") end
        if slow then env:push("slow") end
        _, err, code = env:cli("queue", "resume", "default")
        assert.equal(0, code, err)
      end
      batch(100)
      jr.wait_for(function() return env:count() == 0 end, 20, "warm-up")
      batch(50, true)
      jr.wait_for(function() return #jr.lines(env.dir .. "/slow") >= 1 end,
        20, "slow job started")
      -- only the slow job is left, while it still runs
      jr.wait_for(function() return env:count() == 1 end, 4, "quick jobs recorded")
      assert.same({ "started" }, jr.lines(env.dir .. "/slow"))
      assert.equal(0, env:stop())
    end)
  end)
end
