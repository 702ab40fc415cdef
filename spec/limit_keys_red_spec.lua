-- limit_keys_red_spec.lua - a limit key taken from the payload is the same
-- on both engines for the same payload (docs/limits.md, "The limit key"),
-- by the fair key's rules: each step of the path a field of an object (an
-- array has none), a string as it is, a number by its value (1e3, 1000
-- and 1000.0 are "1000"; a fraction as C's %.16g writes it), anything else
-- unkeyed; a key given at push kept as given. For a push alone (the CLI),
-- a batch (push_many, more rows than SQLite's multi-row INSERT holds) and
-- PostgreSQL's SQL push; and jobs whose keys are equal share one slot.
local jr = require "jr"
local cjson = require "cjson"

local LIMITS = [[limits = {
  ["lkr.t"] = { key = "payload.t", per_key = { concurrency = 1 } },
  ["lkr.a"] = { key = "payload.a.0", per_key = { concurrency = 1 } },
}]]

local LONG = ("x"):rep(257)

-- {name, payload as JSON, the key both engines store (false: unkeyed),
-- the payload as a Lua table for a batch when cjson cannot decode it}
local CASES = {
  { "lkr.a", '{"a": ["x"]}', false },        -- 0 is a field: an array has none
  { "lkr.a", '{"a": {"0": "x"}}', "x" },
  { "lkr.t", '{"t": 1e3}', "1000" },
  { "lkr.t", '{"t": 1000}', "1000" },
  { "lkr.t", '{"t": 1000.0}', "1000" },
  { "lkr.t", '{"t": 1.5}', "1.5" },
  { "lkr.t", '{"t": 1.50}', "1.5" },
  { "lkr.t", '{"t": 1e-7}', "1e-07" },
  { "lkr.t", '{"t": 1e20}', "1e+20" },
  { "lkr.t", '{"t": 12345678901234567}', "12345678901234567",
    { t = 12345678901234567 } },            -- (cjson would read a double)
  { "lkr.t", '{"t": -0.25}', "-0.25" },
  { "lkr.t", '{"t": "1"}', "1" },
  { "lkr.t", '{"t": "1.0"}', "1.0" },        -- a string as it is
  { "lkr.t", '{"t": true}', false },
  { "lkr.t", '{"t": false}', false },
  { "lkr.t", '{"t": null}', false },
  { "lkr.t", '{"t": {}}', false },
  { "lkr.t", '{"t": [1]}', false },
  { "lkr.t", '{"t": ""}', false },
  { "lkr.t", '{"t": "' .. LONG .. '"}', false },  -- over 256 bytes
  { "lkr.t", '{"u": 1}', false },
}

local function keys_of(env)
  local t = {}
  for _, r in ipairs(env:query("SELECT limit_key FROM jobs ORDER BY id")) do
    t[#t + 1] = (r.limit_key ~= nil and r.limit_key ~= cjson.null) and
                r.limit_key or false
  end
  return t
end

local function wants(cases)
  local t = {}
  for i, c in ipairs(cases) do t[i] = c[3] end
  return t
end

local function migrate(env)
  env:config(LIMITS)
  local out, err, code = env:cli("migrate")   -- records the limit paths
  assert.are.equal(0, code, out .. err)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": a limit key from the payload", function()
    local env = jr.test_env(backend)

    it("is the same on both engines for a push alone", function()
      migrate(env)
      for _, c in ipairs(CASES) do env:push(c[1], c[2]) end
      assert.are.same(wants(CASES), keys_of(env))
    end)

    it("is the same for a batch, as for a push alone", function()
      migrate(env)
      local q = jr.client(env)
      local jobs, want = {}, {}
      for r = 1, 2 do
        for _, c in ipairs(CASES) do
          jobs[#jobs + 1] = { c[1], c[4] or cjson.decode(c[2]) }
          want[#want + 1] = c[3]
        end
      end
      assert(#jobs > 32)                     -- SQLite's multi-row INSERT too
      assert(q:push_many(jobs))
      -- one alone through the library too (its single-row statement)
      assert(q:push("lkr.t", { t = 1e20 }))
      want[#want + 1] = "1e+20"
      q:close()
      assert.are.same(want, keys_of(env))
    end)

    it("keeps a key given at push as given", function()
      migrate(env)
      env:push("lkr.t", '{"t": 1e3}', "--key", "1000.0")
      env:push("lkr.a", '{"a": ["x"]}', "--key", "x")
      local q = jr.client(env)
      assert(q:push("lkr.t", { t = 1 }, { key = "1.0" }))
      assert(q:push_many({ { "lkr.t", { t = 1.5 }, { key = "1.50" } },
                           { "lkr.t", { t = true }, { key = "true" } } }))
      q:close()
      local want = { "1000.0", "x", "1.0", "1.50", "true" }
      if backend == "postgres" then
        env:exec([[SELECT push('lkr.t', '{"t": 1e3}', key => '1e3')]])
        want[#want + 1] = "1e3"
      end
      assert.are.same(want, keys_of(env))
    end)

    it("is the replacing push's for a job it replaces (on_conflict)", function()
      migrate(env)
      local q = jr.client(env)
      local u = { unique_key = "u1", on_conflict = "replace" }
      local id = assert(q:push("lkr.t", { t = 1 }, u))
      local id2, _, outcome = q:push("lkr.t", { t = 2.50 }, u)
      assert.are.same({ id, "replaced" }, { id2, outcome })
      assert.are.same({ "2.5" }, keys_of(env))
      -- a given key, likewise; a push without one leaves the job unkeyed,
      -- as a new push of it would be
      assert(q:push("lkr.t", { t = 3 }, { unique_key = "u1",
                                          on_conflict = "replace", key = "k" }))
      assert.are.same({ "k" }, keys_of(env))
      assert(q:push("lkr.t", { u = 4 }, u))
      assert.are.same({ false }, keys_of(env))
      q:close()
    end)

    if backend == "postgres" then
      it("is the same from the SQL push", function()
        migrate(env)
        for _, c in ipairs(CASES) do
          env:exec(("SELECT push('%s', '%s')"):format(c[1], c[2]))
        end
        assert.are.same(wants(CASES), keys_of(env))
      end)
    end

    it("puts jobs whose keys are equal under one slot", function()
      -- the first job of key "1000" holds its slot until the file go
      -- exists; the other spellings of 1000 wait behind it, a job of
      -- another key runs beside it
      env:config(LIMITS .. ", concurrency = 4")
      env:script("lkr.t", jr.RECORD .. [[
        local jobrunner = require "jobrunner"
        return function(job)
          record("started", tostring(job.payload.n))
          local go = os.getenv("PWD") .. "/go"
          for _ = 1, 600 do
            local f = io.open(go)
            if f then f:close() return end
            jobrunner.sleep(0.1)
          end
          error("go never came")
        end
      ]])
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      env:push("lkr.t", '{"t": 1e3, "n": 1}')
      env:push("lkr.t", '{"t": 1000, "n": 2}')
      env:push("lkr.t", '{"t": 1000.0, "n": 3}')
      env:push("lkr.t", '{"t": "1000", "n": 4}')
      env:push("lkr.t", '{"t": 2, "n": 5}')
      assert.are.same({ "1000", "1000", "1000", "1000", "2" }, keys_of(env))
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/started") >= 2 end,
                  30, "two jobs started")
      -- a claim or two more: the keyed "1000" jobs still wait
      jr.sleep(1)
      local started = jr.lines(env.dir .. "/started")
      table.sort(started)
      assert.are.same({ "1", "5" }, started)
      assert.are.equal(2, env:count("running"))
      jr.write_file(env.dir .. "/go", "")
      jr.wait_for(function() return env:count_in("queued", "running") == 0 end,
                  60, "all done")
      assert.are.equal(5, #jr.lines(env.dir .. "/started"))
      assert.equal(0, env:stop())
    end)
  end)
end
