-- poison_row_spec.lua - a row a plain SQL producer wrote with values the
-- push rules would refuse is that job's trouble alone: an attempts count
-- at the integer's top (PostgreSQL's claim added one and failed with
-- "integer out of range", every claim of every queue after it, so no job
-- ran again until the row was deleted), and a run_at no date shows
-- (PostgreSQL takes 'infinity' and the year 50000 in a plain INSERT:
-- show printed a date read from memory gmtime_r never wrote), and a
-- row put in as running with no lease (no rescue ever took it).
local jr = require "jr"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": a row written by plain SQL", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("with attempts at the integer's top stops no claim", function()
      env:cli("migrate")
      env:script("rec", jr.RECORD .. [[
        return function(job) record("ran", job.payload.n) end
      ]])
      local top = backend == "postgres" and "2147483647" or "9223372036854775807"
      env:exec("INSERT INTO jobs (name, payload, attempts) VALUES ('rec', '{\"n\":1}', " ..
        top .. ")")
      local bad = string.format("%d", env:query("SELECT max(id) AS id FROM jobs")[1].id)
      env:push("rec", '{"n":2}')
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/ran") >= 1 end, 20,
        "the job behind it ran")
      -- the row's own job ends dead, past its retries, named in the log
      env:wait_state(bad, "dead", 20)
      env:push("rec", '{"n":3}')
      jr.wait_for(function() return #jr.lines(env.dir .. "/ran") >= 2 end, 20,
        "a later job ran")
      assert.are.same({ "2", "3" }, jr.lines(env.dir .. "/ran"))
      assert.equal(0, env:stop())
      local log = env:log()
      assert.truthy(log:find("job " .. bad .. " (rec) dead: no retries left", 1, true), log)
      assert.is_nil(log:find("out of range", 1, true), log)
      assert.is_nil(log:find("retried with backoff", 1, true), log)
    end)

    it("running with no lease is rescued and run", function()
      env:cli("migrate")
      env:script("rec", jr.RECORD .. [[
        return function(job) record("ran", job.payload.n) end
      ]])
      env:exec("INSERT INTO jobs (name, payload, state) VALUES ('rec', '{\"n\":7}', 'running')")
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/ran") >= 1 end, 30,
        "the leaseless running job rescued and run")
      assert.are.same({ "7" }, jr.lines(env.dir .. "/ran"))
      assert.equal(0, env:stop())
      assert.truthy(env:log():find("requeued 1 job", 1, true), env:log())
    end)

    if backend == "postgres" then
      it("with a run_at no date shows is shown as it is", function()
        env:cli("migrate")
        env:exec("INSERT INTO jobs (name, payload, run_at) VALUES" ..
          " ('rec', '{}', 'infinity'), ('rec', '{}', '50000-01-01')")
        local rows = env:query("SELECT id FROM jobs ORDER BY id")
        local out, err, code = env:cli("show", string.format("%d", rows[1].id))
        assert.equal(0, code, err)
        assert.matches("run_at%s+infinity", out)
        out, err, code = env:cli("show", string.format("%d", rows[2].id))
        assert.equal(0, code, err)
        assert.matches("run_at%s+@1%d+\n", out)
        -- the same twice: nothing read from unset memory
        local a = env:cli("list", "--json")
        local b = env:cli("list", "--json")
        assert.equal(a, b)
        assert.truthy(a:find('"infinity"', 1, true), a)
      end)
    end
  end)
end
