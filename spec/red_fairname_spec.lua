-- red_fairname_spec.lua - a job name's own fair share (docs/queues.md,
-- "Keyed by a job name", "A name's own weights") against a careless user
-- and a hostile producer, on each backend: every producer's first push of
-- the name into a queue the config does not make fair makes it fair and
-- keys the job in the name's scope (the CLI, POST /api/jobs, SQL's push()
-- on PostgreSQL, a plain INSERT on SQLite); a hot reload that drops the
-- handler's fair table gives its queued jobs the queue's key back and they
-- all run; hostile keys (the separator 0x1F, terminal escapes) are shown
-- escaped by `stats` and kept by `stats --json`. Pending: a queue's own
-- key that spells a name's scope takes that name's weight, a fair queue
-- with a concurrency cap of its own takes no turns, and the engines key a
-- number or a boolean differently.
local jr = require "jr"
local cjson = require "cjson"
local H = require "jrhttp"

-- a handler appending its job's id to env.dir/ledger
local function ledger(env)
  return ('function(job) local f = assert(io.open(%q, "a"));'
    .. ' f:write(job.id, "\\n"); f:close() end'):format(env.dir .. "/ledger")
end

local function recorded(env, name)
  jr.wait_for(function()
    return #env:query("SELECT name FROM fair_names WHERE name = '" .. name
      .. "' AND weights IS NOT NULL") == 1
  end, 30, "the runner recorded " .. name .. "'s fair weights")
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " a job name's fair share, red team:", function()
    local env = jr.test_env(backend)

    it("keys every producer's push in the name's scope; a reload dropping the option gives the queue's key back", function()
      local L = ledger(env)
      env:script("rf.w", "return { fair = { key = 'payload.t', weights = { a = 3 } },"
        .. " handle = " .. L .. " }")
      env:script("rf.o", "return " .. L)
      local base = H.start(env, "concurrency = 1")
      recorded(env, "rf.w")
      for _, q in ipairs({ "q1", "q2", "q3" }) do
        assert.equal(0, select(3, env:cli("queue", "pause", q)))
      end
      -- each queue's first push of the name by another producer
      env:push("rf.w", '{"t": "a"}', "--queue", "q1")
      env:push("rf.o", '{"t": "a"}', "--queue", "q1")
      local code, body = H.req(base .. "/api/jobs", { token = true,
        body = '{"name": "rf.w", "payload": {"t": "\\u001b[2Jb\\u001fc"}, "queue": "q2"}' })
      assert.equal(201, code, body)
      code, body = H.req(base .. "/api/jobs", { token = true,
        body = '{"name": "rf.o", "payload": {"t": "b"}, "queue": "q2"}' })
      assert.equal(201, code, body)
      if backend == "postgres" then
        env:query([[SELECT push('rf.w', '{"t": "c"}', queue => 'q3')]])
        env:query([[SELECT push('rf.o', '{"t": "c"}', queue => 'q3')]])
      else
        env:exec([[INSERT INTO jobs (name, payload, queue) VALUES ('rf.w', '{"t": "c"}', 'q3')]])
        env:exec([[INSERT INTO jobs (name, payload, queue) VALUES ('rf.o', '{"t": "c"}', 'q3')]])
      end
      local keys = {}
      for _, r in ipairs(env:query("SELECT queue, name, fair_key FROM jobs ORDER BY id")) do
        keys[#keys + 1] = r.queue .. " " .. r.name .. " " .. tostring(r.fair_key)
      end
      assert.same({ "q1 rf.w rf.w\31a", "q1 rf.o ", "q2 rf.w rf.w\31\27[2Jb\31c",
                    "q2 rf.o ", "q3 rf.w rf.w\31c", "q3 rf.o " }, keys)
      local n = 0
      for _, r in ipairs(env:query("SELECT queue, path FROM fair_paths")) do
        n = n + 1
        assert.is_truthy(r.queue:match("^q[123]$"), r.queue)
      end
      assert.equal(3, n)
      -- a hostile key: escaped in the text, kept in the JSON
      local text = env:cli("stats")
      assert.is_nil(text:find("\27", 1, true), "an escape reached the terminal")
      assert.matches("\\x1b[2Jb\\x1fc", text, 1, true)
      local st = cjson.decode((env:cli("stats", "--json")))
      local seen = {}
      for _, k in ipairs(st.fair_names["rf.w"].top) do seen[k.key] = true end
      assert.is_true(seen["\27[2Jb\31c"], "the key as it is in stats --json")
      -- hot reload: the handler drops its fair table
      env:script("rf.w", "return " .. L)
      jr.wait_for(function() return env:log():find("reloaded: generation") end,
                  30, "the reload")
      jr.wait_for(function()
        return #env:query("SELECT id FROM jobs WHERE name = 'rf.w'"
          .. " AND fair_key <> ''") == 0
      end, 30, "the name's jobs keyed by their queues again")
      for _, q in ipairs({ "q1", "q2", "q3" }) do
        assert.equal(0, select(3, env:cli("queue", "resume", q)))
      end
      jr.wait_for(function() return #jr.lines(env.dir .. "/ledger") == 6 end,
                  30, "the 6 jobs ran")
    end)

    -- A fair queue's own key whose value spells "NAME\31KEY" is a key of
    -- the queue's (stored with a 0x1F in front), not the name's scoped
    -- key: it takes weight 1 and its own turns.
    it("keeps a queue's own key that spells a name's scope out of the name's weights", function()
      env:script("rf.w", jr.RECORD .. [[
        return { fair = { key = "payload.t", weights = { acme = 8 } },
          handle = function(job) record("starts", job.payload.t) end }]])
      env:script("rf.o", jr.RECORD .. [[
        return function(job) record("starts", (job.payload.t:gsub("%c", "|"))) end]])
      env:config([[concurrency = 1,
        limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]])
      env:start()
      recorded(env, "rf.w")
      assert.equal(0, select(3, env:cli("queue", "pause", "fq")))
      local q = jr.client(env)
      local jobs = {}
      for i = 1, 20 do
        jobs[i] = { "rf.o", { t = i % 2 == 0 and "rf.w\31acme" or "zz" }, { queue = "fq" } }
      end
      assert(q:push_many(jobs))
      q:close()
      assert.equal(0, select(3, env:cli("queue", "resume", "fq")))
      jr.wait_for(function() return #jr.lines(env.dir .. "/starts") == 20 end,
                  30, "the 20 jobs ran")
      -- two keys of weight 1: turn about
      local c = 0
      for i, t in ipairs(jr.lines(env.dir .. "/starts")) do
        if i <= 10 and t == "zz" then c = c + 1 end
      end
      assert.is_true(c >= 4, "zz's starts among the first 10: " .. c)
    end)

    -- A fair queue with a `concurrency` cap of its own takes turns by
    -- weight, on both engines, for a queue made fair by a name as for one
    -- fair in the config. The walk of keys planned the turns for the
    -- claim's whole capacity and saved the queue's cursor from that plan,
    -- so with one start allowed a key's whole backlog ran first; a claim
    -- by start tags moves the clock to the tags it took.
    it("takes turns by weight in a queue with a concurrency cap", function()
      env:script("rf.w", jr.RECORD .. [[
        return { fair = { key = "payload.t", weights = { a = 3 } },
          handle = function(job) record("starts", job.payload.t) end }]])
      env:config([[concurrency = 1,
        limits = { ["queue:cq"] = { concurrency = 1 } }]])
      env:start()
      recorded(env, "rf.w")
      assert.equal(0, select(3, env:cli("queue", "pause", "cq")))
      local q = jr.client(env)
      local jobs = {}
      for i = 1, 24 do
        jobs[i] = { "rf.w", { t = i <= 12 and "b" or "a" }, { queue = "cq" } }
      end
      assert(q:push_many(jobs))
      q:close()
      jr.wait_for(function()
        return env:log():find("queue 'cq' is fair", 1, true) ~= nil
      end, 30, "the runner took cq as fair")
      assert.equal(0, select(3, env:cli("queue", "resume", "cq")))
      jr.wait_for(function() return #jr.lines(env.dir .. "/starts") == 24 end,
                  30, "the 24 jobs ran")
      local list = jr.lines(env.dir .. "/starts")
      local a = 0
      for i = 1, 12 do if list[i] == "a" then a = a + 1 end end
      -- 3 a to 1 b while both have jobs: about 9 of the first 12
      assert.is_true(a >= 8 and a <= 10, "first 12 starts: "
        .. table.concat(list, " ", 1, 12))
    end)

    -- A number or a boolean at a name's key path is keyed alike on both
    -- engines: a number by its value (1e3 as "1000"), true as the word.
    it("keys a number and a boolean alike on both engines", function()
      env:script("rf.w", "return { fair = { key = 'payload.t', weights = { a = 3 } },"
        .. " handle = function() end }")
      env:config("concurrency = 1")
      env:start()
      recorded(env, "rf.w")
      assert.equal(0, select(3, env:cli("queue", "pause", "nq")))
      local a = env:push("rf.w", '{"t": 1e3}', "--queue", "nq")
      local b = env:push("rf.w", '{"t": true}', "--queue", "nq")
      local c = env:push("rf.w", '{"t": 1}', "--queue", "nq")
      local function key(id)
        return env:query("SELECT fair_key AS k FROM jobs WHERE id = "
          .. math.tointeger(id))[1].k
      end
      assert.equal("rf.w\0311000", key(a))
      assert.equal("rf.w\031true", key(b))
      assert.equal("rf.w\0311", key(c))
    end)
  end)
end
