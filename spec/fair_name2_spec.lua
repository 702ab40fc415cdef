-- fair_name2_spec.lua - a job name's own fair share (docs/queues.md, "A
-- name's own weights"), on each backend: a handler returning `fair = {
-- key = "payload.t", weights = { a = 3 }, default = 1 }` in a queue the
-- config does not make fair makes it fair by the name's pushes; a
-- backlog of a and b jobs then starts about 3 a for each b, another
-- name's jobs in the queue take turns as one key beside the name's keys
-- (not behind its backlog), `fair set --name` changes a key's weight,
-- and bad option values are the handler's load error naming the file and
-- the field. Starts are counted in the order the handler records them.
local jr = require "jr"
local cjson = require "cjson"
local H = require "jrhttp"

local WORKER = jr.RECORD .. [[
  return { fair = { key = "payload.t", weights = { a = 3 }, default = 1 },
    handle = function(job) record("starts", job.payload.t) end }]]
local OTHER = jr.RECORD .. [[
  return function(job) record("starts", "o") end]]

local function starts(env)
  return jr.lines(env.dir .. "/starts")
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

-- Starts the runner with the name's handler, waits for its weights in
-- the database, pauses queue nq.
local function ready(env, http)
  env:script("fn2.w", WORKER)
  env:script("fn2.o", OTHER)
  local base
  if http then
    base = H.start(env, "concurrency = 1")
  else
    env:config("concurrency = 1")
    env:start()
  end
  jr.wait_for(function()
    return #env:query("SELECT name FROM fair_names WHERE name = 'fn2.w'"
      .. " AND weights IS NOT NULL") == 1
  end, 30, "the runner recorded the handler's fair weights")
  assert.equal(0, select(3, env:cli("queue", "pause", "nq")))
  return base
end

-- Pushes jobs (name, t) into nq, in order, then waits for the runner to
-- take nq as fair (its log) and resumes it.
local function push_run(env, list, before)
  local q = jr.client(env)
  local jobs = {}
  for i, j in ipairs(list) do jobs[i] = { j[1], { t = j[2] }, { queue = "nq" } } end
  assert(q:push_many(jobs))
  q:close()
  jr.wait_for(function()
    return env:log():find("queue 'nq' is fair", 1, true) ~= nil
  end, 30, "the runner took nq as fair")
  if before then before() end
  assert.equal(0, select(3, env:cli("queue", "resume", "nq")))
  jr.wait_for(function() return #starts(env) == #list end, 60,
              #list .. " jobs started")
end

local function backlog(spec)
  local list = {}
  for _, s in ipairs(spec) do
    for _ = 1, s[3] do list[#list + 1] = { s[1], s[2] } end
  end
  return list
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " a job name's own fair share:", function()
    local env = jr.test_env(backend)

    it("makes a queue that is not fair take turns by the name's keys, by its weights", function()
      ready(env)
      push_run(env, backlog { { "fn2.w", "b", 12 }, { "fn2.w", "a", 28 } },
        function()
          -- the keys are in the name's scope
          local keys = env:query("SELECT DISTINCT fair_key AS k FROM jobs"
            .. " WHERE name = 'fn2.w' ORDER BY 1")
          assert.same({ { k = "fn2.w\31a" }, { k = "fn2.w\31b" } }, keys)
        end)
      -- pushed 12 b's then 28 a's: 3 a to 1 b while both have jobs
      local c = first(env, 16)
      assert.is_true((c.a or 0) >= 11 and (c.a or 0) <= 13,
        "first 16 starts: " .. table.concat(starts(env), " ", 1, 16))
    end)

    it("lets another name's jobs take turns beside the name's backlog", function()
      ready(env)
      push_run(env, backlog { { "fn2.w", "a", 24 }, { "fn2.o", "o", 4 } })
      -- key a weighs 3, the other names' key '' 1: the 4 o's among the
      -- first 16 starts, not after the 24 a's pushed before them
      local c = first(env, 16)
      assert.equal(4, c.o, "first 16 starts: "
        .. table.concat(starts(env), " ", 1, 16))
    end)

    it("changes a key's weight with fair set --name; stats show the name's keys", function()
      local base = ready(env, true)
      local out, err, code = env:cli("fair", "set", "--name", "fn2.w", "b", "3")
      assert.equal(0, code, out .. err)
      assert.matches("job name 'fn2.w': fair key 'b' weighs 3", out, 1, true)
      push_run(env, backlog { { "fn2.w", "a", 16 }, { "fn2.w", "b", 16 },
                              { "fn2.w", "c", 1 } }, function()
        -- stats show the name's keys as a fair queue's, their weights its
        local text = env:cli("stats")
        assert.matches("fair name fn2.w: 3 keys with ready jobs", text, 1, true)
        assert.matches("\n  a%s+ready 16%s+running 0%s+weight 3%s", text)
        assert.matches("\n  b%s+ready 16%s+running 0%s+weight 3%s", text)
        assert.matches("\n  c%s+ready 1%s+running 0%s+weight 1%s", text)
        local st = cjson.decode((env:cli("stats", "--json")))
        assert.equal(3, st.fair_names["fn2.w"].keys)
        assert.equal("a", st.fair_names["fn2.w"].top[1].key)
        local code, body = H.req(base .. "/api/stats", { token = true })
        assert.equal(200, code, body)
        local f = cjson.decode(body).fair_names["fn2.w"]
        assert.equal(3, f.keys)
        assert.same({ key = "c", waiting = 1, running = 0, weight = 1,
                      share = 0.1429 }, f.top[3])   -- 1 of 3 + 3 + 1
      end)
      -- a and b weigh 3 each now, c 1: turn about
      local c = first(env, 14)
      assert.is_true((c.b or 0) >= 5 and (c.b or 0) <= 8,
        "first 14 starts: " .. table.concat(starts(env), " ", 1, 14))
    end)

    it("tags the name's pushes by its weights; fair set --name and a weights change tag its queued jobs again", function()
      ready(env)
      local q = jr.client(env)
      local jobs = {}
      for i, t in ipairs { "a", "a", "a", "b", "b" } do
        jobs[i] = { "fn2.w", { t = t }, { queue = "nq" } }
      end
      jobs[#jobs + 1] = { "fn2.o", { t = "a" }, { queue = "nq" } }
      assert(q:push_many(jobs))
      q:close()
      -- (key, weight, tag) of the queued jobs in id order
      local function tags()
        local out = {}
        for _, r in ipairs(env:query("SELECT fair_key AS k, fair_w AS w,"
          .. " fair_tag AS tag FROM jobs WHERE queue = 'nq'"
          .. " AND state = 'queued' ORDER BY id")) do
          out[#out + 1] = ("%s %g %.4f"):format(r.k:gsub("\31", "/"),
                                                tonumber(r.w), tonumber(r.tag))
        end
        return out
      end
      -- a weighs 3 (its jobs a third apart), b the default 1, the other
      -- name's key '' 1: each from the queue's clock (0)
      assert.same({ "fn2.w/a 3 0.0000", "fn2.w/a 3 0.3333",
                    "fn2.w/a 3 0.6667", "fn2.w/b 1 0.0000",
                    "fn2.w/b 1 1.0000", " 1 0.0000" }, tags())
      local out, err, code = env:cli("fair", "set", "--name", "fn2.w", "b", "2")
      assert.equal(0, code, out .. err)
      assert.same({ "fn2.w/a 3 0.0000", "fn2.w/a 3 0.3333",
                    "fn2.w/a 3 0.6667", "fn2.w/b 2 0.0000",
                    "fn2.w/b 2 0.5000", " 1 0.0000" }, tags())
      -- the handler's weights changed: a weighs 1 now; b keeps fair set's
      env:script("fn2.w", jr.RECORD .. [[
        return { fair = { key = "payload.t", weights = { a = 1 } },
          handle = function(job) record("starts", job.payload.t) end }]])
      env:signal("HUP")
      jr.wait_for(function()
        return #env:query("SELECT name FROM fair_names WHERE name = 'fn2.w'"
          .. " AND CAST(weights AS TEXT) NOT LIKE '%3%'") == 1
      end, 30, "the runner recorded the handler's new weights")
      assert.same({ "fn2.w/a 1 0.0000", "fn2.w/a 1 1.0000",
                    "fn2.w/a 1 2.0000", "fn2.w/b 2 0.0000",
                    "fn2.w/b 2 0.5000", " 1 0.0000" }, tags())
      assert.equal(0, select(3, env:cli("queue", "resume", "nq")))
      jr.wait_for(function() return #starts(env) == 6 end, 60, "6 jobs started")
    end)

    it("keeps the name's keys apart from a fair queue's, in the claim's keys and in stats", function()
      env:config([[concurrency = 1,
        limits = { ["queue:fq"] = { fair = { key = "payload.t", weights = { a = 2 } } } }]])
      env:script("fn2.w", WORKER)
      env:script("fn2.o", OTHER)
      env:start()
      jr.wait_for(function()
        return #env:query("SELECT name FROM fair_names WHERE name = 'fn2.w'") == 1
      end, 30, "the runner recorded the handler's fair weights")
      assert.equal(0, select(3, env:cli("queue", "pause", "fq")))
      local w = env:push("fn2.w", '{"t": "a"}', "--queue", "fq")
      local o = env:push("fn2.o", '{"t": "a"}', "--queue", "fq")
      local keys = env:query("SELECT fair_key AS k FROM jobs WHERE id IN ("
        .. math.tointeger(w) .. ", " .. math.tointeger(o) .. ") ORDER BY id")
      assert.same({ { k = "fn2.w\31a" }, { k = "a" } }, keys)
      local text = env:cli("stats")
      assert.matches("fair queue fq: 1 key with ready jobs", text, 1, true)
      assert.matches("\n  a%s+ready 1%s+running 0%s+weight 2%s", text)
      assert.matches("fair name fn2.w: 1 key with ready jobs", text, 1, true)
      assert.matches("\n  a%s+ready 1%s+running 0%s+weight 3%s", text)
      assert.equal(0, select(3, env:cli("queue", "resume", "fq")))
      jr.wait_for(function() return #starts(env) == 2 end, 60, "both jobs")
    end)

    it("takes a key's weight from a hook with jobrunner.fair.set_name", function()
      env:config(([[concurrency = 1,
        hooks = { on_start = function()
          local fair = require "jobrunner.fair"
          local f = io.open(%q, "a")
          f:write(tostring(select(2, fair.set_name("fn2.w", "b", 0))), "\n")
          f:write(tostring(select(2, fair.set_name("no name", "b", 2))), "\n")
          f:write(tostring(fair.set_name("fn2.w", "b", 5)), "\n")
          f:close()
        end }]]):format(env.dir .. "/seen"))
      env:script("fn2.w", WORKER)
      env:start()
      jr.wait_for(function()
        return #env:query("SELECT key FROM fair_name_keys WHERE name = 'fn2.w'") == 1
      end, 30, "the hook's weight stored")
      assert.same({ { key = "b", weight = 5 } },
        env:query("SELECT key, weight FROM fair_name_keys"))
      assert.same({ "jobrunner.fair.set_name: the weight must be a number from 1 to 1000",
                    "jobrunner.fair.set_name: not a job name", "true" },
                  jr.lines(env.dir .. "/seen"))
    end)

    it("refuses bad table values, naming the file and the field", function()
      env:config("concurrency = 1")
      local cases = {
        { "{ weights = { a = 2 } }", "'fair.key' is missing" },
        { '{ key = "t" }', "'fair.key' must be a payload path" },
        { '{ key = "payload.t", weights = { a = 0 } }',
          "'fair.weights.a' must be an integer from 1 to 1000" },
        { '{ key = "payload.t", weights = { a = 2.5 } }',
          "'fair.weights.a' must be an integer from 1 to 1000" },
        { '{ key = "payload.t", weights = { [1] = 2 } }',
          "'fair.weights' keys must be UTF-8 strings" },
        { '{ key = "payload.t", weights = { ["a\\0b"] = 2 } }',
          "'fair.weights' keys must be UTF-8 strings" },
        { '{ key = "payload.t", weights = 4 }', "'fair.weights' must be a table" },
        { '{ key = "payload.t", default = 1001 }',
          "'fair.default' must be an integer from 1 to 1000" },
        { '{ key = "payload.t", weight = { a = 2 } }',
          "'fair.weight' is not a fair setting (valid: key, weights, default)" },
      }
      for i, c in ipairs(cases) do
        env:script("bad" .. i, "return { fair = " .. c[1]
          .. ", handle = function() end }")
      end
      env:script("zgood", jr.RECORD .. [[
        return function(job) record("starts", "g") end]])
      local out, err, code = env:cli("check")
      assert.are_not.equal(0, code)
      for i, c in ipairs(cases) do
        assert.matches("bad" .. i .. ".lua: " .. c[2], out .. err, 1, true)
      end
      -- the files after them load and run
      env:start()
      env:push("zgood", "{}")
      jr.wait_for(function() return #starts(env) == 1 end, 30, "zgood ran")
      out, err, code = env:cli("fair", "set", "--name", "fn2.w", "b", "0")
      assert.equal(2, code)
      assert.matches("the WEIGHT must be a number from 1 to 1000", err, 1, true)
      -- a name no runner recorded weights of: stored, with a note
      out, err, code = env:cli("fair", "set", "--name", "fn2.nope", "b", "2")
      assert.equal(0, code, err)
      assert.matches("note: job name 'fn2.nope' has no fair weights of its own", err, 1, true)
    end)
  end)
end
