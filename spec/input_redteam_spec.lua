-- input_redteam_spec.lua - input a careless user or an attacker gives the
-- config: tables with metatables (their __index ran unprotected inside
-- the readers: a raise aborted `check` and the runner, a loop hung them),
-- strings holding a NUL byte (read cut short: "scripts\0x" was
-- "scripts"), and os.exit (it ended `check` without a word, and the
-- runner itself at a reload). Each refused naming the key and its line,
-- as a bad hook now is.
local jr = require "jr"

local first_backend = jr.backends()[1]

-- Each case: the bad key's text (on a line of its own) and the whole
-- message after "jobrunner.lua:LINE: ".
local CASES = {
  { 'concurrency = setmetatable({}, { __index = function() error("x") end })',
    "'concurrency' has a metatable: the config's tables must be plain tables" },
  { 'http = setmetatable({}, { __index = function() while true do end end })',
    "'http' has a metatable: the config's tables must be plain tables" },
  { 'schedules = { setmetatable({ name = "a", every = 60 }, {}) }',
    "'schedules[1]' has a metatable: the config's tables must be plain " ..
    "tables" },
  { 'pid_file = "run.pid\\0evil"',
    "'pid_file' holds a NUL byte (byte 8)" },
  { 'timezone = "UTC\\0junk"',
    "'timezone' holds a NUL byte (byte 4)" },
  { 'queues = { ["mail\\0x"] = 2 }',
    "'queues' has a key holding a NUL byte ('mail' then NUL)" },
  { 'serve_queues = { "mail\\0x" }',
    "'serve_queues[1]' holds a NUL byte (byte 5)" },
  { 'limits = { x = { per_key = { rate = "1/1s\\0zz" } } }',
    "'limits.x.per_key.rate' holds a NUL byte (byte 5)" },
  { 'schedules = { { name = "a", every = 60, tz = "UTC\\0x" } }',
    "'schedules[1].tz' holds a NUL byte (byte 4)" },
  -- these passed `check`; `run` then stopped at the server's start
  { 'http = { listen = "127.0.0.1:8080.5" }',
    "'http.listen' '127.0.0.1:8080.5' is not HOST:PORT with a port from 0 " ..
    "to 65535, such as \"127.0.0.1:8089\"" },
  { 'http = { listen = "127.0.0.1: 8089" }',
    "'http.listen' '127.0.0.1: 8089' is not HOST:PORT with a port from 0 " ..
    "to 65535, such as \"127.0.0.1:8089\"" },
  -- each fire pushes it: PostgreSQL refused every fire, SQLite took it
  { 'max_payload = 10, schedules = { { name = "a", every = 60, ' ..
    'payload = { s = "0123456789ab" } } }',
    "schedule 'a': 'payload' is 20 bytes as JSON, over max_payload (10)" },
  -- the count's error named the last limit read ('limits.n17.concurrency')
  { 'limits = (function() local l = {} for i = 1, 300 do ' ..
    'l["n" .. i] = { concurrency = 1 } end return l end)()',
    "'limits' has more than 256 limits" },
  -- a hook's error named the file without its line
  { 'hooks = { on_strat = function() end }',
    "unknown hook 'hooks.on_strat' (valid: on_start, on_stop, on_reload, " ..
    "on_job_start, on_job_success, on_job_retry, on_job_dead, on_scale, " ..
    "on_tick)" },
  { 'hooks = { on_start = 5 }',
    "'hooks.on_start' must be a function" },
}

describe("config input:", function()
  local env = jr.test_env(first_backend)

  for _, case in ipairs(CASES) do
    it("refuses " .. case[1] .. " naming the key and its line", function()
      env:config("watch = false,\n  " .. case[1])
      local line = jr.line_of(env, case[1])
      local _, err, code = jr.sh("cd " .. env.dir .. " && timeout 60 " ..
        jr.bin .. " -c " .. env.config_file .. " check")
      assert.equal(3, code, err)
      assert.equal(("jobrunner: %s:%d: %s\n"):format(env.config_file, line,
        case[2]), err)
    end)
  end

  it("says a directory given as a file is one", function()
    -- the config and push-flow said "Cannot allocate memory" and nothing
    local _, err, code = jr.sh("cd " .. env.dir .. " && " .. jr.bin ..
      " -c " .. env.dir .. " check")
    assert.equal(3, code, err)
    assert.equal(("jobrunner: cannot read config '%s': Is a directory\n")
      :format(env.dir), err)
    env:config("watch = false")
    _, err, code = env:cli("push-flow", env.dir)
    assert.equal(2, code, err)
    assert.equal(("jobrunner: push-flow: cannot read '%s': Is a " ..
      "directory\n"):format(env.dir), err)
  end)

  it("refuses a returned table with a metatable", function()
    env:config("watch = false")
    local f = assert(io.open(env.config_file, "w"))
    f:write('return setmetatable({}, { __index = function(_, k) ' ..
      'error("index " .. k) end })\n')
    f:close()
    local _, err, code = env:cli("check")
    assert.equal(3, code, err)
    assert.equal(("jobrunner: %s: the table it returns has a metatable: " ..
      "the config's tables must be plain tables\n"):format(env.config_file),
      err)
  end)

  it("refuses os.exit while loading, saying so", function()
    env:config("watch = false")
    local text = jr.read_file(env.config_file)
    local f = assert(io.open(env.config_file, "w"))
    f:write("os.exit(0)\n" .. text)
    f:close()
    local _, err, code = env:cli("check")
    assert.equal(3, code, err)
    assert.matches("^jobrunner: " .. env.config_file:gsub("%p", "%%%0") ..
      ":1: os.exit%(0%) called by the config: it cannot stop the runner\n",
      err)
  end)
end)

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " config reload:", function()
    local env = jr.test_env(backend)

    it("keeps running when the new config calls os.exit", function()
      env:script("h", jr.RECORD .. [[
        return function(job) record("ran", job.id) end]])
      env:config("watch = false")
      local text = jr.read_file(env.config_file)
      env:start()
      local f = assert(io.open(env.config_file, "w"))
      f:write("os.exit(0)\n" .. text)
      f:close()
      env:signal("HUP")
      jr.wait_for(function() return env:log():find("reload failed") end, 30,
        "the reload's failure")
      assert.matches("os.exit%(0%) called by the config", env:log())
      assert.is_true(env:alive())
      f = assert(io.open(env.config_file, "w"))
      f:write(text)
      f:close()
      local id = env:push("h")
      jr.wait_for(function()
        return jr.lines(env.dir .. "/ran")[1] == tostring(id)
      end, 30, "the job run after the failed reload")
      assert.equal(0, env:stop())
    end)
  end)
end

-- Flows a careless producer writes, and the exact message every producer
-- gives: a NUL character in a name, a key or a ref (read cut short:
-- "step\u0000x" was pushed as a step job), an unknown top-level key (a
-- misspelt "bacth" dropped the batch without a word), an after id past
-- 2^63 (made 2^63 - 1), and the push check's "job 'NAME': " said twice
-- when the ref is the name.
local FLOWS = {
  { '{"jobs":[{"name":"step\\u0000x"}]}',
    "flow: job 1: 'name' holds a NUL character (\\u0000)" },
  { '{"jobs":[{"name":"step","key":"k\\u0000x"}]}',
    "flow: job 1: 'key' holds a NUL character (\\u0000)" },
  { '{"jobs":[{"name":"step","ref":"a\\u0000b"},{"name":"step"}]}',
    "flow: job 1: 'ref' holds a NUL character (\\u0000)" },
  { '{"jobs":[{"name":"step"}],"bacth":{"on_complete":"step"}}',
    "flow: unknown key 'bacth' (valid: jobs, batch)" },
  { '{"jobs":[{"name":"step","after":[9223372036854775808]}]}',
    "flow: job 'step': after: 9223372036854775808 is not a job id (a " ..
    "whole number)" },
  { '{"jobs":[{"name":"step","after":[-1]}]}',
    "flow: job 'step': after: -1 is not a job id" },
  { '{"jobs":[{"name":"step"}],"batch":{}}',
    "flow: job 'step': its batch has neither on_complete nor on_success" },
  -- the first "jobs" was pushed, the second dropped
  { '{"jobs":[{"name":"step"}],"jobs":[{"name":"other"}]}',
    "flow: 'jobs' is given twice" },
  -- a payload nested 1001 deep: refused as a push refuses it (the flow
  -- reader stopped at 64 below the flow: 100 deep, pushed by push, was
  -- refused in a flow)
  { '{"jobs":[{"name":"step","payload":{"a":' .. ("["):rep(1000) ..
    ("]"):rep(1000) .. '}}]}',
    "flow: job 'step': invalid JSON payload: byte 1005: nested deeper " ..
    "than 1000" },
}

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " flow input:", function()
    local env = jr.test_env(backend)

    it("push-flow, POST /api/flows and q:flow refuse them alike", function()
      local H = require "jrhttp"
      local cjson = require "cjson"
      env:script("step", "return function() end")
      local base = H.start(env)
      local q = jr.client(env)
      for i, case in ipairs(FLOWS) do
        local path = ("%s/f%d.json"):format(env.dir, i)
        jr.write_file(path, case[1])
        local out, err, code = env:cli("push-flow", path)
        assert.equal(2, code, out .. err)
        assert.equal("jobrunner: " .. case[2] .. "\n", err)
        local status, body = H.req(base .. "/api/flows",
          { body = case[1], token = true })
        assert.equal(400, status, body)
        assert.equal(case[2], cjson.decode(body).error)
      end
      -- a payload as deep as a push takes goes in a flow too
      local deep = '{"a":' .. ("["):rep(999) .. ("]"):rep(999) .. '}'
      local path = env.dir .. "/deep.json"
      jr.write_file(path, '{"jobs":[{"name":"parked","payload":' .. deep ..
        '}]}')
      local out, err, code = env:cli("push-flow", path)
      assert.equal(0, code, out .. err)
      local row = env:job(tonumber(out:match("parked (%d+)")))
      assert.equal(deep, (row.payload:gsub(" ", "")))
      env:exec("DELETE FROM jobs")
      -- the Lua module: its encoder refuses the NUL byte itself
      local ids, msg = q:flow({ jobs = { { name = "step\0x" } } })
      assert.is_nil(ids)
      assert.equal("flow: payload.jobs[1].name: string holds a NUL byte " ..
        "(byte 5): no backend stores one", msg)
      ids, msg = q:flow({ jobs = { { name = "step" } },
                          bacth = { on_complete = "step" } })
      assert.is_nil(ids)
      assert.equal(FLOWS[4][2], msg)
      q:close()
      assert.equal(0, env:count())
      assert.equal(0, env:stop())
    end)
  end)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " http input:", function()
    local env = jr.test_env(backend)

    it("refuses a wait holding a NUL byte, as the list's filters", function()
      local H = require "jrhttp"
      local cjson = require "cjson"
      env:script("step", "return function() end")
      local base = H.start(env)
      local id = env:push("nohandler")
      -- "1%00x" was read as a wait of 1 s
      local code, body = H.req(("%s/api/jobs/%d?wait=1%%00x"):format(base,
        id), { token = true })
      assert.equal(400, code, body)
      assert.equal("the query string has a NUL byte (%00)",
        cjson.decode(body).error)
      code, body = H.req(("%s/api/jobs/%d?wait=0"):format(base, id),
        { token = true })
      assert.equal(200, code, body)
      assert.equal("queued", cjson.decode(body).state)
      assert.equal(0, env:stop())
    end)

    it("POST /api/jobs names a bad after id, not the list's length", function()
      local H = require "jrhttp"
      local cjson = require "cjson"
      local base = H.start(env)
      -- each said "must be an array of at most 1000 job ids"
      for _, case in ipairs({
        { '{"name":"step","after":[-1]}', "job.after: -1" },
        { '[{"name":"step","after":[1, 9223372036854775808]}]',
          "jobs[0].after: 9223372036854775808" },
        { '{"name":"step","after":[0]}', "job.after: 0" } }) do
        local code, body = H.req(base .. "/api/jobs",
          { body = case[1], token = true })
        assert.equal(400, code, body)
        assert.equal(case[2] .. " is not a job id (a whole number from 1 " ..
          "to 9223372036854775807)", cjson.decode(body).error)
      end
      local ids = {}
      for i = 1, 1001 do ids[i] = 1 end
      local code, body = H.req(base .. "/api/jobs", { token = true,
        body = cjson.encode({ name = "step", after = ids }) })
      assert.equal(400, code, body)
      assert.equal("job.after: must be an array of at most 1000 job ids",
        cjson.decode(body).error)
      assert.equal(0, env:count())
      assert.equal(0, env:stop())
    end)
  end)
end
