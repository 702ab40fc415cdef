-- fair_alone_red_spec.lua - a fair queue that is the config's only
-- limit (no cap, rate, key or aging: the claim's fast path on each
-- engine) attacked as an attacker and a careless user would
-- (docs/queues.md, "Fair share"): a tenant's single job pushed, retried,
-- snoozed or made ready later behind another's backlog starts within
-- about one claim round; a higher priority job goes first; a plain queue
-- or a second fair queue gaining jobs mid-drain is not starved; several
-- runners, a runner killed mid-drain and a config losing or gaining
-- `fair` run every job once; keys of odd types all run. Starts are
-- counted in the order the handler records them; bounds are job counts,
-- no timings.
local jr = require "jr"

-- Records "tenant n queue" at each start; asleep for payload.ms (1 ms by
-- default: short jobs are claimed ahead in batches). payload.snooze
-- snoozes the first attempt 1 s, payload.fail fails it (backoff 1 s).
local WORKER = jr.RECORD .. [[
  local jr = require("jobrunner")
  return {
    backoff = 1,
    handle = function(job)
      local p = job.payload
      local t = p.t
      if type(t) ~= "string" or #t > 40 or t:find("%c") or t == "" then t = "odd" end
      local stop = jr.now() + (p.ms or 1) / 1000
      jr.sleep(math.max(0, stop - jr.now()))
      local mark = os.getenv("PWD") .. "/mark." .. job.id
      local f = io.open(mark)
      if (p.snooze or p.fail) and not f then
        io.open(mark, "w"):close()
        record("starts", t .. " " .. p.n .. " " .. job.queue .. " first")
        if p.snooze then jr.snooze(1) end
        error("first attempt fails")
      end
      if f then f:close() end
      record("starts", t .. " " .. p.n .. " " .. job.queue)
    end,
  }]]

local function config(env, extra, conc)
  env:config(([[concurrency = %d,
    limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }%s]]):format(
      conc or 1, extra or ""))
end

local function push(env, t, n, opts, extra)
  local q = jr.client(env)
  local jobs = {}
  for i = 1, n do
    local p = { t = t, n = i }
    for k, v in pairs(extra or {}) do p[k] = v end
    local o = { queue = "fq" }
    for k, v in pairs(opts or {}) do o[k] = v end
    jobs[i] = { "fair.w", p, o }
  end
  assert(q:push_many(jobs))
  q:close()
end

local function starts(env)
  return jr.lines(env.dir .. "/starts")
end

-- Index (1-based) of the first start line matching pattern, or nil.
local function index_of(lines, pattern)
  for i, l in ipairs(lines) do
    if l:find(pattern) then return i end
  end
end

-- Waits for at least k starts and returns how many there were.
local function wait_starts(env, k, msg)
  return jr.wait_for(function()
    local n = #starts(env)
    return n >= k and n
  end, 120, msg or ("%d starts"):format(k))
end

local function drained(env)
  jr.wait_for(function()
    return env:count_in("queued", "running", "waiting") == 0
  end, 180, "drained")
end

-- Every job's final start recorded exactly once: no loss, no double run.
local function once_each(env, expect)
  local seen, n = {}, 0
  for _, l in ipairs(starts(env)) do
    if not l:find(" first$") then
      assert.is_nil(seen[l], "started twice: " .. l)
      seen[l] = true
      n = n + 1
    end
  end
  assert.equal(expect, n)
end

-- A bound for "about one claim round" with jobs claimed ahead: the
-- runner's local queue is dealt round robin after each claim, and
-- another's push brings a small claim, so a new key's job is handed
-- out next. The starts between the push's return and the job's start
-- are noisy on a loaded machine (1 ms jobs: a slow push is 100 starts;
-- a CI at load 7 saw 206), so the bound is 300: what it catches is a job
-- handed out after the local queue (up to 512 claimed ahead) or after
-- the whole backlog.
local ROUND = 300

-- Another queue's job, or a higher priority one, has no small claim of
-- its own while the local queue is full (its starts counted from its
-- push's return: a push slowed by a loaded machine is not the claim's
-- wait): it waits for the next claim
-- (docs/queues.md, "Fairness": "a claim or two"), after at most the up
-- to 512 jobs claimed ahead, on the plain claim as on the fair one (the
-- controls below). What this bound catches is a wait behind the backlog.
local LOCALQ = 512 + ROUND

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " fair queue alone, red:", function()
    local env = jr.test_env(backend)

    it("starts a key pushed mid-drain behind a backlog of 2000 short jobs within a round", function()
      config(env)
      env:script("fair.w", WORKER)
      push(env, "a", 2000)
      env:start()
      wait_starts(env, 300)
      -- counted from the push's return (the two runners' case says why)
      push(env, "b", 1)
      local at = #starts(env)
      local s = starts(env)
      jr.wait_for(function() s = starts(env) return index_of(s, "^b 1 ") end, 120, "b's start")
      local b = index_of(s, "^b 1 ")
      assert.is_true(b - at <= ROUND, ("b's push returned after start %d, b started %d-th"):format(at, b))
      drained(env)
      once_each(env, 2001)
    end)

    it("starts a key's job that a snooze brings back, before the backlog ends", function()
      config(env)
      env:script("fair.w", WORKER)
      push(env, "a", 1500, nil, { ms = 5 })
      push(env, "b", 1, nil, { snooze = true })
      env:start()
      drained(env)
      local s = starts(env)
      local b1, b2 = index_of(s, "^b 1 fq first"), index_of(s, "^b 1 fq$")
      assert.is_truthy(b1, "b never started")
      assert.is_truthy(b2, "b never started again after its snooze")
      -- 1 s of snooze against 1500 jobs of 5 ms: the rerun comes back
      -- with the backlog about 200 starts on (and up to 512 claimed
      -- ahead), not after all of it
      assert.is_true(b2 < 1000, ("b's snoozed job started again %d-th of %d"):format(b2, #s))
      once_each(env, 1501)
    end)

    it("starts a key's retried job before the backlog ends", function()
      config(env)
      env:script("fair.w", WORKER)
      push(env, "a", 1500, nil, { ms = 5 })
      push(env, "b", 1, { max_retries = 3 }, { fail = true })
      env:start()
      drained(env)
      local s = starts(env)
      local b2 = index_of(s, "^b 1 fq$")
      assert.is_truthy(b2, "b's retry never ran")
      assert.is_true(b2 < 1000, ("b's retried job started %d-th of %d"):format(b2, #s))
      once_each(env, 1501)
    end)

    it("starts a job whose run_at arrives mid-drain before the backlog ends", function()
      config(env)
      env:script("fair.w", WORKER)
      push(env, "a", 1500, nil, { ms = 5 })
      push(env, "b", 1, { run_in = 1 })
      env:start()
      drained(env)
      local s = starts(env)
      local b = index_of(s, "^b 1 ")
      assert.is_true(b < 1000, ("b (run_in 1 s) started %d-th of %d"):format(b, #s))
      once_each(env, 1501)
    end)

    it("starts a higher priority job pushed after a long backlog next", function()
      config(env)
      env:script("fair.w", WORKER)
      push(env, "a", 2000)
      env:start()
      wait_starts(env, 300)
      push(env, "a", 1, { priority = -5 }, { hi = true, n = 0 })
      local at = #starts(env)     -- counted from the push's return
      local s
      jr.wait_for(function() s = starts(env) return index_of(s, "^a 0 ") end, 120, "hi start")
      local hi = index_of(s, "^a 0 ")
      assert.is_true(hi - at <= LOCALQ, ("priority -5 pushed after start %d started %d-th"):format(at, hi))
      drained(env)
    end)

    it("does not starve a plain queue's job pushed while the fair queue drains alone", function()
      config(env)
      env:script("fair.w", WORKER)
      push(env, "a", 2000)
      env:start()
      wait_starts(env, 300)
      push(env, "p", 1, { queue = "plain" })
      local at = #starts(env)     -- counted from the push's return
      local s
      jr.wait_for(function() s = starts(env) return index_of(s, "^p 1 plain") end, 120, "plain start")
      local p = index_of(s, "^p 1 plain")
      assert.is_true(p - at <= LOCALQ, ("plain job pushed after start %d started %d-th"):format(at, p))
      drained(env)
      once_each(env, 2001)
    end)

    -- failed on PostgreSQL (three runs of three) with a backlog of 3000:
    -- fq2's one job started 3001st, after all of fq's backlog; SQLite
    -- started it after the local queue (about the 770th), as the plain claim does
    -- PostgreSQL's claim under limits took each fair queue's rows queue
    -- after queue, and the first's filled the batch: the second's new
    -- key started last (now in turn, by rank)
    it("gives a second fair queue's new key its turn while the first drains", function()
      env:config([[concurrency = 1,
        limits = { ["queue:fq"] = { fair = { key = "payload.t" } },
                   ["queue:fq2"] = { fair = { key = "payload.t" } } }]])
      env:script("fair.w", WORKER)
      push(env, "a", 2000)
      env:start()
      wait_starts(env, 300)
      push(env, "c", 1, { queue = "fq2" })
      local at = #starts(env)     -- counted from the push's return
      local s
      jr.wait_for(function() s = starts(env) return index_of(s, "^c 1 fq2") end, 120, "fq2 start")
      local c = index_of(s, "^c 1 fq2")
      assert.is_true(c - at <= LOCALQ, ("fq2's job pushed after start %d started %d-th"):format(at, c))
      drained(env)
      once_each(env, 2001)
    end)

    it("follows weights set with fair set mid-drain", function()
      config(env)
      env:script("fair.w", WORKER)
      push(env, "a", 2000)
      push(env, "b", 2000)
      env:start()
      wait_starts(env, 200)
      local _, err, code = env:cli("fair", "set", "fq", "b", "4")
      assert.equal(0, code, err)
      local at = #starts(env)
      wait_starts(env, at + LOCALQ + 1000)
      local s, a, b = starts(env), 0, 0
      -- the window after the jobs claimed ahead before the change (up to
      -- LOCALQ, dealt by the weights they were claimed with) on: b 4 to
      -- a's 1. A window from 200 starts after the change gave 705 to 296
      -- on PostgreSQL, with the local queue's old shares in it
      for i = at + LOCALQ, at + LOCALQ + 1000 do
        if s[i]:find("^a ") then a = a + 1 else b = b + 1 end
      end
      -- 4 to 1 is 800 of 1000; the bound catches weights ignored (1 to
      -- 1) with room for a claim's batch at the window's edges
      assert.is_true(b >= 2.5 * a, ("after fair set b 4: a %d, b %d"):format(a, b))
      drained(env)
      once_each(env, 4000)
    end)

    -- b's starts are counted from its push's return, not from before
    -- it as with one runner: four workers (two runners, two each) on a
    -- loaded machine start jobs four times as fast, and the push itself
    -- (the client's connection, the insert, its commit) spanned 266 to
    -- 1000 starts in a third of the runs, all before any claim could see
    -- b; from its return b started 3 to 171 starts later, the first
    -- claim to begin after the commit taking it.
    it("shares the turns and runs every job once with two runners on one database", function()
      config(env, nil, 2)
      env:script("fair.w", WORKER)
      push(env, "a", 2000)
      env:start()
      env:start()
      wait_starts(env, 300)
      push(env, "b", 1)
      local at = #starts(env)
      local s
      jr.wait_for(function() s = starts(env) return index_of(s, "^b 1 ") end, 120, "b's start")
      local b = index_of(s, "^b 1 ")
      assert.is_true(b - at <= ROUND, ("b's push returned after start %d, b started %d-th"):format(at, b))
      drained(env)
      once_each(env, 2001)
    end)

    it("runs every job after a runner is killed -9 mid-drain", function()
      config(env, [[, lease = 2]], 2)
      env:script("fair.w", WORKER)
      push(env, "a", 1000, nil, { ms = 3 })
      push(env, "b", 1000, nil, { ms = 3 })
      local p1 = env:start()
      wait_starts(env, 200)
      env:stop("KILL", p1)
      env:start()
      push(env, "c", 1)
      drained(env)
      local seen = {}
      for _, l in ipairs(starts(env)) do seen[l:match("^(%S+ %d+)")] = true end
      for _, t in ipairs({ "a", "b" }) do
        for i = 1, 1000 do assert.is_true(seen[t .. " " .. i], t .. " " .. i .. " never ran") end
      end
      assert.is_true(seen["c 1"], "c 1 never ran")
    end)

    it("runs every job when fair is removed then added between runs", function()
      config(env)
      env:script("fair.w", WORKER)
      push(env, "a", 1500, nil, { ms = 2 })
      local p = env:start()
      wait_starts(env, 200)
      env:stop("TERM", p)
      env:config([[concurrency = 1]])
      push(env, "b", 100)
      p = env:start()
      wait_starts(env, #starts(env) + 200)
      env:stop("TERM", p)
      config(env)
      local at = #starts(env)
      push(env, "c", 1)
      env:start()
      local s
      jr.wait_for(function() s = starts(env) return index_of(s, "^c 1 ") end, 120, "c's start")
      local c = index_of(s, "^c 1 ")
      assert.is_true(c - at <= ROUND, ("c pushed with %d started, started %d-th"):format(at, c))
      drained(env)
      once_each(env, 1601)
    end)

    -- the ten pushes go one by one: a runner that sees more than 8 of
    -- them at once has its small claim come back full, with a new key's
    -- job last, and claims again (fair_burst_red_spec); before, the rest
    -- waited for the next claim, after the local queue (the string "1"
    -- started 210 starts after its push, one run of nine on SQLite)
    it("runs keys of odd types and lets each start within a round", function()
      config(env)
      env:script("fair.w", WORKER)
      push(env, "a", 2000)
      env:start()
      wait_starts(env, 300)
      local odd = {
        { name = "num", t = 1 },
        { name = "str1", t = "1" },
        { name = "float", t = 1.5 },
        { name = "true", t = true },
        { name = "false", t = false },
        { name = "huge", t = ("x"):rep(100000) },
        { name = "ctl", t = "a\1\n\t\31b" },
        { name = "empty", t = "" },
        { name = "obj", t = { 1, 2 } },
      }
      local q = jr.client(env)
      -- each push's own mark, at its return: ten pushes one after the
      -- other wait for the writer in turn (and a push's own time is no
      -- claim's: the two runners' case)
      local at = {}
      for i, o in ipairs(odd) do
        assert(q:push("fair.w", { t = o.t, n = 1000 + i }, { queue = "fq" }))
        at[i] = #starts(env)
      end
      -- missing path
      assert(q:push("fair.w", { n = 2000 }, { queue = "fq" }))
      local at_m = #starts(env)
      q:close()
      drained(env)
      local s = starts(env)
      for i, o in ipairs(odd) do
        local k = index_of(s, " " .. (1000 + i) .. " fq$")
        assert.is_truthy(k, o.name .. " key's job never ran")
        assert.is_true(k - at[i] <= ROUND, ("%s key's push returned after start %d, started %d-th"):format(o.name, at[i], k))
      end
      local m = index_of(s, " 2000 fq$")
      assert.is_truthy(m, "job without the key never ran")
      assert.is_true(m - at_m <= ROUND, ("job without the key's push returned after %d, started %d-th"):format(at_m, m))
    end)
    it("follows weights a hook sets with limits.set mid-drain", function()
      config(env, [[,
    tick_interval = 1,
    hooks = { on_tick = function()
      local f = io.open(os.getenv("PWD") .. "/flip")
      if f then
        f:close()
        assert(require("jobrunner.limits").set("queue:fq",
          { fair = { weights = { b = 4 } } }))
      end
    end }]])
      env:script("fair.w", WORKER)
      push(env, "a", 2000, nil, { ms = 2 })
      push(env, "b", 2000, nil, { ms = 2 })
      env:start()
      wait_starts(env, 200)
      jr.write_file(env.dir .. "/flip", "")
      jr.sleep(3)
      local at = #starts(env)
      wait_starts(env, at + 800)
      local s, a, b = starts(env), 0, 0
      for i = at + 1, at + 800 do
        if s[i]:find("^a ") then a = a + 1 else b = b + 1 end
      end
      -- 4 to 1 is 640 of 800; a run on PostgreSQL gave 599 (the local
      -- queue's dealing), so the bound catches weights ignored (1 to 1)
      assert.is_true(b >= 2.5 * a, ("after limits.set b 4: a %d, b %d"):format(a, b))
      drained(env)
      once_each(env, 4000)
    end)

    it("starts a tenant's second single job, pushed right after its first, within a round", function()
      config(env)
      env:script("fair.w", WORKER)
      push(env, "a", 2000)
      env:start()
      wait_starts(env, 300)
      local q = jr.client(env)
      local at1 = #starts(env)
      assert(q:push("fair.w", { t = "z", n = 1 }, { queue = "fq" }))
      local at2 = #starts(env)
      assert(q:push("fair.w", { t = "z", n = 2 }, { queue = "fq" }))
      q:close()
      drained(env)
      local s = starts(env)
      local z1, z2 = index_of(s, "^z 1 "), index_of(s, "^z 2 ")
      assert.is_true(z1 - at1 <= ROUND, ("z's first pushed after start %d started %d-th"):format(at1, z1))
      assert.is_true(z2 - at2 <= ROUND, ("z's second pushed after start %d started %d-th"):format(at2, z2))
    end)

    -- the clock a claim may leave unmoved while another claim holds it:
    -- a key idle while two runners drain others comes back from the
    -- clock, not from its old finish, so it banks no turns
    it("gives a key idle during a two-runner drain no banked turns when it comes back", function()
      config(env, nil, 2)
      env:script("fair.w", WORKER)
      push(env, "c", 1, nil, { ms = 10, n = 0 })
      push(env, "a", 1500, nil, { ms = 10 })
      push(env, "b", 1500, nil, { ms = 10 })
      env:start()
      env:start()
      wait_starts(env, 600)
      local at = #starts(env)
      push(env, "c", 300, nil, { ms = 10 })
      wait_starts(env, at + 400)
      local s, c = starts(env), 0
      for i = at + 1, at + 300 do c = c + (s[i]:find("^c ") and 1 or 0) end
      -- three keys of weight 1: about 100 of the 300 starts; a clock left
      -- behind gives c its old finish and every start until it catches up
      assert.is_true(c <= 150, ("c came back with %d of the next 300 starts"):format(c))
      drained(env)
      once_each(env, 3301)
    end)

    -- controls: the same two pushes with no limit at all (the plain
    -- claim, docs/queues.md "Fairness": a backlog "does not delay another
    -- queue's jobs by more than a claim or two"), to tell whether a
    -- failure above is the fair claim's or every claim's
    it("control (no fair): starts a plain queue's job pushed mid-drain within a round", function()
      env:config([[concurrency = 1]])
      env:script("fair.w", WORKER)
      push(env, "a", 2000)
      env:start()
      wait_starts(env, 300)
      push(env, "p", 1, { queue = "plain" })
      local at = #starts(env)     -- counted from the push's return
      local s
      jr.wait_for(function() s = starts(env) return index_of(s, "^p 1 plain") end, 120, "plain start")
      local p = index_of(s, "^p 1 plain")
      assert.is_true(p - at <= LOCALQ, ("plain job pushed after start %d started %d-th"):format(at, p))
      drained(env)
    end)

    it("control (no fair): starts a higher priority job pushed mid-drain within a round", function()
      env:config([[concurrency = 1]])
      env:script("fair.w", WORKER)
      push(env, "a", 2000)
      env:start()
      wait_starts(env, 300)
      push(env, "a", 1, { priority = -5 }, { n = 0 })
      local at = #starts(env)     -- counted from the push's return
      local s
      jr.wait_for(function() s = starts(env) return index_of(s, "^a 0 ") end, 120, "hi start")
      local hi = index_of(s, "^a 0 ")
      assert.is_true(hi - at <= LOCALQ, ("priority -5 pushed after start %d started %d-th"):format(at, hi))
      drained(env)
    end)
  end)
end
