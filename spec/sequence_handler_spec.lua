-- sequence_handler_spec.lua - sequence as a handler option
-- (docs/queues.md, "Sequences"), on each backend: a handler returning
-- `sequence = "payload.c"` puts each job of its name pushed without a
-- sequence into the sequence its payload's c names, whoever pushes it
-- (the CLI, the Lua module, a handler, POST /api/jobs); a job pushed
-- with its own sequence keeps it, one without the field runs outside any;
-- the jobs of a sequence run one at a time in push order; a bad path is
-- the handler's load error, naming the file; SQL's push takes none.
local jr = require "jr"
local cjson = require "cjson"
local H = require "jrhttp"

-- Records "C N START END" per run.
local LED = jr.RECORD .. [[
  local jobrunner = require "jobrunner"
  return { sequence = "payload.c", handle = function(job)
    local t0 = jobrunner.now()
    jobrunner.sleep(math.max(0, t0 + 0.02 - jobrunner.now()))
    record("seq", ("%s %d %.6f %.6f"):format(tostring(job.payload.c),
                                             job.payload.n, t0, jobrunner.now()))
  end }]]

-- Job id's sequence key and state.
local function seq_of(env, id)
  local r = env:query("SELECT sequence_key AS k, state FROM jobs WHERE id = "
                      .. math.tointeger(id))[1]
  if r.k == cjson.null then return nil, r.state end
  return r.k, r.state
end

local FEED = [[
  local jobrunner = require "jobrunner"
  return function(job)
    for n = 5, 6 do jobrunner.push("led", { c = "a", n = n }) end
  end]]

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " sequence as a handler option:", function()
    local env = jr.test_env(backend)

    it("puts the jobs of its name into the sequence their payload names, from every producer", function()
      env:script("led", LED)
      env:script("feed", FEED)
      local base = H.start(env, "concurrency = 4")
      jr.wait_for(function()
        return #env:query("SELECT name FROM sequence_paths WHERE path = 'c'") == 1
      end, 30, "the runner recorded the handler's sequence")
      assert.equal(0, select(3, env:cli("queue", "pause", "default")))
      local ids = {}
      ids[1] = env:push("led", '{"c": "a", "n": 1}')
      ids[2] = jr.client(env):push("led", { c = "a", n = 2 })
      local st, body = H.req(base .. "/api/jobs", { method = "POST", token = true,
        body = cjson.encode({ name = "led", payload = { c = "a", n = 3 } }) })
      assert.equal(201, st, body)
      ids[3] = cjson.decode(body).id
      ids[4] = env:push("led", '{"c": 7, "n": 4}')
      local own = env:push("led", '{"c": "a", "n": 9}', "--sequence", "mine")
      local none = env:push("led", '{"n": 10}')
      -- the handler's pushes (queue f is not paused)
      env:push("feed", "{}", "--queue", "f")
      jr.wait_for(function()
        return #env:query("SELECT id FROM jobs WHERE name = 'led'") == 8
      end, 30, "the handler pushed")
      assert.are.same({ "a", "queued" }, { seq_of(env, ids[1]) })
      for i = 2, 3 do assert.are.same({ "a", "waiting" }, { seq_of(env, ids[i]) }) end
      assert.are.same({ "7", "queued" }, { seq_of(env, ids[4]) })
      assert.equal("mine", (seq_of(env, own)))
      assert.is_nil((seq_of(env, none)))
      local fed = env:query("SELECT sequence_key FROM jobs WHERE name = 'led' AND seq_no >= 4")
      assert.equal(2, #fed)
      assert.equal(0, select(3, env:cli("queue", "resume", "default")))
      jr.wait_for(function() return env:count() == 0 end, 60, "drained")
      assert.equal(0, env:stop())
      local a = {}
      for _, l in ipairs(jr.lines(env.dir .. "/seq")) do
        local c, n, s, e = l:match("^(%S+) (%d+) (%S+) (%S+)$")
        if c == "a" and tonumber(n) < 9 then
          a[#a + 1] = { n = tonumber(n), s = tonumber(s), e = tonumber(e) }
        end
      end
      table.sort(a, function(x, y) return x.s < y.s end)
      local order = {}
      for i, r in ipairs(a) do
        order[i] = r.n
        if i > 1 then assert.is_true(r.s >= a[i - 1].e, "overlap at " .. r.n) end
      end
      assert.are.same({ 1, 2, 3, 5, 6 }, order)
    end)

    it("refuses a handler whose sequence is not a payload path, naming the file", function()
      env:script("bad", [[return { sequence = "customer", handle = function() end }]])
      local out, err, code = env:cli("check")
      assert.are_not.equal(0, code)
      assert.matches("bad.lua: 'sequence' must be a payload path such as "
        .. '"payload.customer_id"', out .. err, 1, true)
    end)

    if backend == "postgres" then
      it("leaves SQL's push out of the handler's sequence", function()
        env:script("led", LED)
        env:start()
        jr.wait_for(function()
          return #env:query("SELECT name FROM sequence_paths") == 1
        end, 30, "the runner recorded the handler's sequence")
        assert.equal(0, env:stop())
        local id = env:query(("SELECT %s.push('led', '{\"c\": \"a\", \"n\": 1}') AS id")
          :format(env.schema))[1].id
        assert.is_nil((seq_of(env, id)))
      end)
    end
  end)
end
