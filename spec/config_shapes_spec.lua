-- config_shapes_spec.lua - every table-valued key of the config and the
-- push option `after`, given a map where a list goes or a list where a
-- map goes: refused naming the key and its file:line, never read as
-- nothing. Schedules may be written as a map, NAME = { ... }: each is
-- named by its key, and such a schedule fires on both backends.
local jr = require "jr"

local first_backend = jr.backends()[1]

-- Each case: the bad key's text (on a line of its own, after a line that
-- says nothing) and the whole message after "jobrunner.lua:LINE: ".
local CASES = {
  { 'schedules = { { name = "a", every = 60 }, b = { every = 60 } }',
    "'schedules' mixes a list and names: found the key 'b' beside the " ..
    "list; write a list of { name = ..., ... } or a map of NAME = { ... }" },
  { 'schedules = { [3] = { every = 60 } }',
    "'schedules' keys must be schedule names, found the key [3]" },
  { 'schedules = { nightly = 5 }',
    "'schedules' must hold tables, 'nightly' is number" },
  { 'schedules = { ["bad name"] = { every = 60 } }',
    "'schedules' has a key that is not a schedule's name: invalid name " ..
    "'bad name': character 4 is not one of [A-Za-z0-9_.:-]" },
  { 'schedules = { nightly = { name = "other", every = 60 } }',
    "schedule 'nightly': 'name' differs from its key 'nightly' (a " ..
    "schedule written as NAME = { ... } is named by its key)" },
  { 'queues = { { name = "a" } }',
    "'queues' must be a table of queue = concurrency, found the key [1]" },
  { 'serve_queues = { a = true }',
    "'serve_queues' must be a list of queue names, found the key 'a'" },
  { 'serve_queues = { "a", x = 1 }',
    "'serve_queues' must be a list of queue names, found the key 'x'" },
  { 'concurrency = { 1, 4 }',
    "'concurrency' must be a number or { min = A, max = B }, got a list" },
  { 'concurrency = { min = 1, mx = 4 }',
    "'concurrency' has an unknown key 'mx' (valid: min, max)" },
  { 'defaults = { 3 }',
    "'defaults' must be a table of named keys, found the key [1]" },
  { 'log = { "debug" }',
    "'log' must be a table of named keys, found the key [1]" },
  { 'retention = { "1d" }',
    "'retention' must be a table of named keys, found the key [1]" },
  { 'hooks = { function() end }',
    "'hooks' must be a table of NAME = function, found the key [1]" },
  { 'http = { "127.0.0.1:0" }',
    "'http.?' is not a key of http (listen, token, token_file, token_env, tokens, max_connections)" },
  { 'limits = { { name = "x", concurrency = 1 } }',
    "'limits' keys must be job names or \"queue:NAME\", found a number" },
  { 'limits = { x = { per_key = 3 } }',
    "'limits.x.per_key' must be a table such as { concurrency = 1 }, got " ..
    "number" },
}

describe("config shapes:", function()
  local env = jr.test_env(first_backend)

  for _, case in ipairs(CASES) do
    it("refuses " .. case[1] .. " naming the key and its line", function()
      env:config("watch = false,\n  " .. case[1])
      local line = jr.line_of(env, case[1])
      local _, err, code = env:cli("check")
      assert.equal(3, code, err)
      assert.equal(("jobrunner: %s:%d: %s\n"):format(env.config_file, line,
        case[2]), err)
    end)
  end

  it("reads schedules written as a map, each named by its key", function()
    env:script("tick", "return function() end")
    env:config('schedules = {\n    weekly = { cron = "0 4 * * 1" },\n' ..
      '    nightly = { cron = "0 3 * * *", name = "nightly" },\n  }')
    local out, err, code = env:cli("schedules", "--json")
    assert.equal(0, code, err)
    local list = require("cjson").decode(out).schedules
    assert.equal(2, #list)
    assert.equal("nightly", list[1].name)
    assert.equal("weekly", list[2].name)
    assert.equal("0 3 * * *", list[1].cron)
    -- a field of one is found on its line
    env:config('schedules = {\n    nightly = { cron = "0 3 * * *" },\n' ..
      '    weekly = {\n      cron = "0 4 * * 1",\n      queue = 5 },\n  }')
    _, err, code = env:cli("check")
    assert.equal(3, code, err)
    assert.equal(("jobrunner: %s:%d: schedule 'weekly': 'queue' must be " ..
      "a string, got number\n"):format(env.config_file,
      jr.line_of(env, "queue = 5")), err)
  end)

  it("the Lua module refuses an after option that is a map or mixed", function()
    local q = jr.client(env)
    for _, after in ipairs({ { a = 1 }, { 1, x = 2 } }) do
      local ok, msg = pcall(q.push, q, "tick", {}, { after = after })
      assert.is_false(ok)
      assert.matches("push: option 'after' must be an array of job ids, " ..
        "found the key '%a'", msg)
    end
    q:close()
    assert.equal(0, env:count())
  end)
end)

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " schedules as a map:", function()
    local env = jr.test_env(backend)

    it("fire as the list form does", function()
      env:script("tick", jr.RECORD .. [[
        return function(job) record("fired", job.payload.v) end]])
      env:config('poll_interval = 0.2, schedules = { every_sec = { ' ..
        'every = "1s", job = "tick", payload = { v = "m" } } }')
      env:start()
      jr.wait_for(function()
        return #jr.lines(env.dir .. "/fired") >= 2
      end, 30, "two fires of the keyed schedule")
      assert.equal("m", jr.lines(env.dir .. "/fired")[1])
      local rows = env:query("SELECT DISTINCT schedule FROM schedule_fires")
      assert.equal(1, #rows)
      assert.equal("every_sec", rows[1].schedule)
      assert.equal(0, env:stop())
    end)
  end)
end
