-- push_options_spec.lua - one reader for push options: the producer
-- module's q:push and a handler's jobrunner.push read the same options
-- table the same way, so the same mistake gets the same message (option
-- name, what was given, the range) from both.
local h = require "jr"
local jr = require "jobrunner"

-- Bad options tables, as Lua source that the spec and a handler both load.
local CASES = [[{
  { run_in = "soon" },
  { run_at = {} },
  { run_in = 0/0 },
  { run_at = 1/0 },
  { run_at = -1 },
  { run_in = 1e12 },
  { run_at = 2e9, run_in = 5 },
  { priority = 1.5 },
  { priority = "high" },
  { priority = math.maxinteger },
  { max_retries = -5 },
  { max_retries = 2.5 },
  { queue = 5 },
  { queue = "bad queue" },
  { queue = "q\0x" },
  { prio = 1 },
  { [1] = 2 },
}]]

-- The message without the function's name in front ("push: ",
-- "jobrunner.push: "): what is left must be the same from both.
local function core(msg)
  return (tostring(msg):gsub("^jobrunner%.push: ", ""):gsub("^push: ", ""))
end

for _, backend in ipairs(h.backends()) do
  describe(backend .. " push options:", function()
    local env = h.test_env(backend)

    it("get the same message from q:push and from a handler's push", function()
      env:script("probe", h.RECORD .. [[
        local jobrunner = require "jobrunner"
        local cases = ]] .. CASES .. [[

        return function(job)
          for i, opts in ipairs(cases) do
            local ok, err = pcall(jobrunner.push, "x", {}, opts)
            record("errors", i .. "\t" .. (ok and "accepted" or
                                           tostring(err):gsub("\n", " ")))
          end
        end]])
      env:start()
      local id = env:push("probe")
      h.wait_for(function() return env:job(id) == nil end)
      assert.equal(0, env:stop())
      local from_handler = {}
      for _, l in ipairs(h.lines(env.dir .. "/errors")) do
        local i, msg = l:match("^(%d+)\t(.*)$")
        from_handler[tonumber(i)] = msg
      end

      local q = assert(jr.open(env.url, { schema = env.schema }))
      local cases = assert(load("return " .. CASES))()
      for i, opts in ipairs(cases) do
        local ok, id2, msg = pcall(q.push, q, "x", {}, opts)
        local from_client = ok and (msg or "accepted") or id2
        from_client = tostring(from_client):gsub("\n", " ")
        assert.is_not.equal("accepted", from_client, "case " .. i)
        assert.equal(core(from_client), core(from_handler[i]), "case " .. i)
      end
      q:close()
      assert.equal(0, env:count())
    end)

    it("name the option, what was given and the range", function()
      local q = assert(jr.open(env.url, { schema = env.schema }))
      local function err_of(opts)
        local ok, id, msg = pcall(q.push, q, "x", {}, opts)
        return tostring(ok and msg or id)
      end
      assert.matches("option 'run_in' must be a number, got string",
                     err_of({ run_in = "soon" }), 1, true)
      assert.matches("option 'queue' must be a string, got number",
                     err_of({ queue = 5 }), 1, true)
      assert.matches("option 'priority' is out of range: " ..
                     "9223372036854775807 (from -2147483648 to 2147483647)",
                     err_of({ priority = math.maxinteger }), 1, true)
      assert.matches("option 'max_retries' is out of range: -5",
                     err_of({ max_retries = -5 }), 1, true)
      assert.matches("unknown option 'prio' (valid: run_in, run_at, " ..
                     "priority, queue, max_retries, unique_key, unique_for, on_conflict, key, result_ttl, after, on_parent_failure, batch, sequence, on_failure, expires_in, expires_at, deadline, traceparent, tracestate, cost)", err_of({ prio = 1 }),
                     1, true)
      assert.matches("run_in", err_of({ run_in = 0/0 }), 1, true)
      q:close()
    end)
  end)
end
