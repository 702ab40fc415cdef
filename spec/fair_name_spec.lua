-- fair_name_spec.lua - fair share keyed by a job name (docs/queues.md,
-- "Fair share"), on each backend: a handler returning `fair =
-- "payload.tenant"` keys each job of its name pushed into a fair queue at
-- that path, over the queue's own key, whoever pushes it (the CLI, the
-- library, SQL's push() on PostgreSQL); another name's jobs in the queue
-- keep the queue's key; the claim then takes turns between the name's
-- keys, by the queue's weights; a bad path is the handler's load error.
-- Starts are counted in the order the handler records them, no timings.
local jr = require "jr"
local cjson = require "cjson"

local WORKER = jr.RECORD .. [[
  return { fair = "payload.tenant", handle = function(job)
    record("starts", job.payload.tenant)
  end }]]

local function config(env, weights)
  env:config(([[concurrency = 1,
    limits = { ["queue:fq"] = { fair = { key = "payload.t"%s } } }]]):format(
    weights and (", weights = " .. weights) or ""))
end

local function starts(env)
  return jr.lines(env.dir .. "/starts")
end

-- Starts the runner, waits for it to record the name's path, pauses fq.
local function ready(env)
  env:script("fn.w", WORKER)
  env:start()
  jr.wait_for(function()
    return #env:query("SELECT name FROM fair_names WHERE name = 'fn.w'") == 1
  end, 30, "the runner recorded the handler's fair path")
  assert.equal(0, select(3, env:cli("queue", "pause", "fq")))
end

local function key_of(env, id)
  local k = env:query("SELECT fair_key AS k FROM jobs WHERE id = " .. math.tointeger(id))[1].k
  return k ~= cjson.null and k or nil
end

-- The first n of the starts, counted by key.
local function first(env, n)
  local c = {}
  for i, t in ipairs(starts(env)) do
    if i > n then break end
    c[t] = (c[t] or 0) + 1
  end
  return c
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " fair share keyed by a job name:", function()
    local env = jr.test_env(backend)

    it("keys its jobs at its path over the queue's, from every producer, and takes turns by them", function()
      config(env)
      ready(env)
      local cli = env:push("fn.w", '{"tenant": "a", "t": "same"}', "--queue", "fq")
      local q = jr.client(env)
      local jobs = {}
      for i = 1, 9 do jobs[i] = { "fn.w", { tenant = "a", t = "same" }, { queue = "fq" } } end
      for i = 10, 19 do jobs[i] = { "fn.w", { tenant = "b", t = "same" }, { queue = "fq" } } end
      assert(q:push_many(jobs))
      local other = q:push("fn.other", { tenant = "a", t = "same" }, { queue = "fq" })
      q:close()
      assert.equal("a", key_of(env, cli))
      assert.equal("same", key_of(env, other))
      local keys = env:query("SELECT fair_key AS k, count(*) AS n FROM jobs"
        .. " WHERE name = 'fn.w' GROUP BY fair_key ORDER BY fair_key")
      assert.same({ { k = "a", n = 10 }, { k = "b", n = 10 } }, keys)
      if backend == "postgres" then
        local id = env:query(("SELECT %s.push('fn.w', '{\"tenant\": \"c\", \"t\": \"same\"}',"
          .. " queue => 'fq') AS id"):format(env.schema))[1].id
        assert.equal("c", key_of(env, id))
        env:exec("DELETE FROM jobs WHERE id = " .. math.tointeger(id))
      end
      env:exec("DELETE FROM jobs WHERE name = 'fn.other'")
      assert.equal(0, select(3, env:cli("queue", "resume", "fq")))
      jr.wait_for(function() return #starts(env) == 20 end, 60, "the 20 jobs")
      -- pushed 10 a's then 10 b's: by turn, not in push order
      local c = first(env, 10)
      assert.is_true((c.a or 0) >= 4 and (c.b or 0) >= 4,
        "first 10 starts: " .. table.concat(starts(env), " ", 1, 10))
    end)

    it("shares by the queue's weights of the name's keys", function()
      config(env, "{ heavy = 3 }")
      ready(env)
      local q = jr.client(env)
      local jobs = {}
      for i = 1, 12 do jobs[i] = { "fn.w", { tenant = "light", t = "same" }, { queue = "fq" } } end
      for i = 13, 24 do jobs[i] = { "fn.w", { tenant = "heavy", t = "same" }, { queue = "fq" } } end
      assert(q:push_many(jobs))
      q:close()
      assert.equal(0, select(3, env:cli("queue", "resume", "fq")))
      jr.wait_for(function() return #starts(env) == 24 end, 60, "the 24 jobs")
      -- 3 starts of heavy to 1 of light while both have jobs
      local c = first(env, 12)
      assert.is_true((c.heavy or 0) >= 8 and (c.heavy or 0) <= 10,
        "first 12 starts: " .. table.concat(starts(env), " ", 1, 12))
    end)

    it("gives a name that drops its path its queue's keys back", function()
      config(env)
      ready(env)
      local id = env:push("fn.w", '{"tenant": "a", "t": "q"}', "--queue", "fq")
      assert.equal("a", key_of(env, id))
      env:script("fn.w", [[return function() end]])
      assert.equal(0, env:stop())
      env:start()
      jr.wait_for(function()
        return #env:query("SELECT name FROM fair_names") == 0
      end, 30, "the runner dropped the name's path")
      assert.equal("q", key_of(env, id))
    end)

    it("refuses a handler whose fair is not a payload path, naming the file", function()
      config(env)
      env:script("bad", [[return { fair = "tenant", handle = function() end }]])
      local out, err, code = env:cli("check")
      assert.are_not.equal(0, code)
      assert.matches("bad.lua: 'fair' must be a payload path such as "
        .. '"payload.customer_id"', out .. err, 1, true)
    end)
  end)
end
