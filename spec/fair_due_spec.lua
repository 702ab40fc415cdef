-- fair_due_spec.lua - a fair queue's jobs that are not yet due
-- (docs/queues.md, "Fair share"): pushed to run later (run_in), back
-- after a failure with a backoff, or snoozed, they take no turn of their
-- key while they wait, and once due they take their key's turn from the
-- queue's clock then: neither ahead of the keys that waited meanwhile
-- (a key's jobs tagged before they were due started one after another,
-- ahead of another key's whole backlog) nor behind them. Both engines;
-- the runner claims one job at a time (jobs of 60 ms), so starts go in
-- tag order. Bounds are job counts, no timings.
local jr = require "jr"

-- Records "t n" at each start (and "t n first" for an attempt that fails
-- or snoozes); busy payload.ms first (jobs of under 5 ms are claimed
-- ahead in batches, which the runner deals by key: that would hide the
-- tags' order). payload.fail fails the first attempt (backoff 2 s),
-- payload.snooze snoozes it 2 s.
local WORKER = jr.RECORD .. [[
  local jr = require("jobrunner")
  return {
    backoff = 2,
    handle = function(job)
      local p = job.payload
      local stop = jr.now() + (p.ms or 0) / 1000
      jr.sleep(math.max(0, stop - jr.now()))
      local mark = os.getenv("PWD") .. "/mark." .. job.id
      local f = io.open(mark)
      if (p.snooze or p.fail) and not f then
        io.open(mark, "w"):close()
        record("starts", p.t .. " " .. p.n .. " first")
        if p.snooze then jr.snooze(2) end
        error("first attempt fails")
      end
      if f then f:close() end
      record("starts", p.t .. " " .. p.n)
    end,
  }]]

local function config(env)
  env:config([[concurrency = 1,
    limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]])
end

local function push(env, t, n, opts, extra)
  local q = jr.client(env)
  local jobs = {}
  for i = 1, n do
    local p = { t = t, n = i }
    for k, v in pairs(extra or {}) do p[k] = v end
    local o = { queue = "fq" }
    for k, v in pairs(opts or {}) do o[k] = v end
    jobs[i] = { "due.w", p, o }
  end
  assert(q:push_many(jobs))
  q:close()
end

local function starts(env)
  return jr.lines(env.dir .. "/starts")
end

local function wait_starts(env, pattern, k, msg)
  jr.wait_for(function()
    local n = 0
    for _, l in ipairs(starts(env)) do
      if l:find(pattern) then n = n + 1 end
    end
    return n >= k
  end, 120, msg)
end

-- The final starts of key c's jobs among b's backlog: they must take
-- turns with b's (at most 2 of c's in a row, two due at one claim being
-- tagged the clock and the next, and at least 4 of b's between c's
-- first and last: a key's jobs tagged before they were due ran 10 in a
-- row), and end before b's backlog does (not starved behind it).
local function takes_turns(env, nc)
  local s = starts(env)
  local first, last, lastb, run, most, bs = nil, nil, nil, 0, 0, 0
  for i, l in ipairs(s) do
    if l:find("^c %d+$") then
      first = first or i
      last = i
      run = run + 1
      if run > most then most = run end
    elseif l:find("^b %d+$") then
      run = 0
      lastb = i
      if first then bs = bs + 1 end
    end
  end
  local seen = table.concat(s, ",")
  assert.is_truthy(first, "c never started: " .. seen)
  local cs = 0
  for _, l in ipairs(s) do if l:find("^c %d+$") then cs = cs + 1 end end
  assert.equal(nc, cs, seen)
  -- b's starts after c's last one are not between
  for i = last + 1, #s do if s[i]:find("^b %d+$") then bs = bs - 1 end end
  assert.is_true(most <= 2, ("c ran %d in a row: %s"):format(most, seen))
  assert.is_true(bs >= nc // 2 - 1, ("only %d of b's between c's first and last: %s"):format(bs, seen))
  assert.is_true(last < lastb, "c's jobs ended after b's backlog: " .. seen)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " fair queue, jobs not yet due:", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("a key's jobs due later take their turns from the clock when due, among a backlog", function()
      config(env)
      env:script("due.w", WORKER)
      env:start()
      push(env, "b", 60, nil, { ms = 60 })
      wait_starts(env, "^b ", 3, "b's first starts")
      push(env, "c", 10, { run_in = 2 }, { ms = 60 })
      jr.wait_for(function() return #starts(env) >= 70 end, 120, "70 starts")
      assert.equal(0, env:stop())
      takes_turns(env, 10)
    end)

    it("a key's retries (backoff 2 s) take their turns from the clock when due", function()
      config(env)
      env:script("due.w", WORKER)
      env:start()
      push(env, "c", 10, { max_retries = 3 }, { fail = true, ms = 60 })
      wait_starts(env, "^c %d+ first$", 10, "c's first attempts")
      push(env, "b", 60, nil, { ms = 60 })
      jr.wait_for(function() return #starts(env) >= 80 end, 120, "80 starts")
      assert.equal(0, env:stop())
      takes_turns(env, 10)
    end)

    it("a key's snoozed jobs (2 s) take their turns from the clock when due", function()
      config(env)
      env:script("due.w", WORKER)
      env:start()
      push(env, "c", 10, nil, { snooze = true, ms = 60 })
      wait_starts(env, "^c %d+ first$", 10, "c's first attempts")
      push(env, "b", 60, nil, { ms = 60 })
      jr.wait_for(function() return #starts(env) >= 80 end, 120, "80 starts")
      assert.equal(0, env:stop())
      takes_turns(env, 10)
    end)

    it("a job pushed to run later is untagged until due, and its key's finish stays", function()
      config(env)
      local out, err, code = env:cli("migrate")
      assert.equal(0, code, out .. err)
      push(env, "c", 3, { run_in = 3600 })
      push(env, "c", 1, { run_at = os.time() - 10 }, { n = 9 })
      local q = jr.client(env)
      assert(q:push("due.w", { t = "c", n = 10 }, { queue = "fq", run_in = 3600 }))
      assert(q:push("due.w", { t = "c", n = 11 }, { queue = "fq" }))
      q:close()
      local tags = {}
      for _, r in ipairs(env:query("SELECT fair_key AS k, fair_tag AS tag FROM jobs"
          .. " WHERE queue = 'fq' ORDER BY id")) do
        assert.equal("c", r.k)
        tags[#tags + 1] = (r.tag == nil or r.tag == require("cjson").null) and "-" or r.tag
      end
      assert.are.same({ "-", "-", "-", 0, "-", 1 }, tags)
      -- another program's insert, due later: keyed, not tagged
      local later = env.backend == "postgres" and "now() + interval '1 hour'"
        or "(julianday('now') - 2440587.5) * 86400.0 + 3600"
      env:exec(([[INSERT INTO jobs (name, payload, queue, state, run_at)
        VALUES ('due.w', '{"t": "c", "n": 12}', 'fq', 'queued', %s)]]):format(later))
      local r = env:query("SELECT fair_key AS k, fair_tag AS tag FROM jobs"
        .. " WHERE queue = 'fq' ORDER BY id DESC LIMIT 1")[1]
      assert.equal("c", r.k)
      assert.is_true(r.tag == nil or r.tag == require("cjson").null, "tagged " .. tostring(r.tag))
    end)
  end)
end
