-- redseq_spec.lua - attacks on retrying and rerunning the jobs of
-- sequences by hand (docs/queues.md, "Sequences": "Run again by hand
-- after the sequence went on"; docs/http.md for the API's retry and
-- rerun), on each backend: a dead job the sequence went past goes to the
-- end of its sequence behind the job holding it, like a new push; a dead
-- `block` head keeps its place; never two jobs of one sequence at once;
-- every job runs; clear errors for bad ids.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

-- A handler that records "start K N ATTEMPT" and "end K N ATTEMPT ok|fail"
-- in file seq. Payload: hold (waits for file "gate-K-N", and consumes
-- it: each run waits for a gate of its own), ms (sleeps that long),
-- fail (fails until file "heal-K-N" or "heal-all" exists). No retries:
-- a failure is dead at once. A success returns a value, so the job is
-- kept completed (rerun can take it).
local function step_source(retries)
  return (jr.RECORD .. [[
  local jobrunner = require "jobrunner"
  local function exists(p)
    local f = io.open(p)
    if f then f:close() end
    return f ~= nil
  end
  return { max_retries = RETRIES, backoff = 0.1, handle = function(job)
    local p = job.payload
    local dir = os.getenv("PWD")
    record("seq", ("start %s %d %d"):format(p.k, p.n, job.attempt))
    local ok, e = pcall(function()
      if p.hold then
        local gate = dir .. "/gate-" .. p.k .. "-" .. p.n
        while not exists(gate) do jobrunner.sleep(0.02) end
        os.remove(gate)
      end
      if p.ms then jobrunner.sleep(p.ms / 1000) end
    end)
    if not ok then
      record("seq", ("end %s %d %d cancelled"):format(p.k, p.n, job.attempt))
      error(e)
    end
    local failed = p.fail and not exists(dir .. "/heal-" .. p.k .. "-" .. p.n)
      and not exists(dir .. "/heal-all")
    record("seq", ("end %s %d %d %s"):format(p.k, p.n, job.attempt, failed and "fail" or "ok"))
    if failed then error("job " .. p.n .. " fails") end
    return { n = p.n }
  end }]]):gsub("RETRIES", tostring(retries))
end
local STEP = step_source(0)

-- The events of key k in file seq, in the order written.
local function events(env, k)
  local t = {}
  for _, l in ipairs(jr.lines(env.dir .. "/seq")) do
    local ev, key, n, a, how = l:match("^(%a+) (%S+) (%d+) (%d+) ?(%a*)$")
    if key == k then t[#t + 1] = { ev = ev, n = tonumber(n), a = tonumber(a), how = how } end
  end
  return t
end

-- The numbers of the jobs of k that succeeded, in order, and whether one
-- started while another of k had started and not ended. A start without
-- an end (its runner killed) is dropped when gone is true.
local function check_order(env, k, gone)
  local evs = events(env, k)
  -- with gone: a start with no end of its job and attempt before the next
  -- start of the same (its runner was killed) is dropped
  local orphan = {}
  if gone then
    for i, e in ipairs(evs) do
      if e.ev == "start" then
        local found = false
        for j = i + 1, #evs do
          local f = evs[j]
          if f.n == e.n and f.a == e.a then
            found = f.ev == "end"
            break
          end
        end
        orphan[i] = not found
      end
    end
  end
  local done, open, overlap = {}, nil, false
  for i, e in ipairs(evs) do
    if e.ev == "start" then
      if not orphan[i] then
        if open then overlap = true end
        open = e.n
      end
    else
      if open == e.n then open = nil end
      if e.how == "ok" then done[#done + 1] = e.n end
    end
  end
  return done, overlap
end

local function dump(env)
  return "\n" .. (jr.read_file(env.dir .. "/seq") or "")
end

-- (A handler records its end before the runner commits the job's
-- completion: after these counts a job's state is waited for.)
local function ok_count(env, k)
  return #(check_order(env, k))
end

-- How many times job n of k started.
local function starts(env, k, n)
  local c = 0
  for _, e in ipairs(events(env, k)) do
    if e.ev == "start" and e.n == n then c = c + 1 end
  end
  return c
end

local function pushp(env, k, payload, ...)
  payload.k = k
  return env:push("step", cjson.encode(payload), "--sequence", k, ...)
end

local function open_gate(env, k, n)
  jr.write_file(("%s/gate-%s-%d"):format(env.dir, k, n), "x")
end

local function heal(env, k, n)
  jr.write_file(("%s/heal-%s-%d"):format(env.dir, k, n), "x")
end

local function cli_ok(env, ...)
  local out, err, code = env:cli(...)
  assert.equal(0, code, table.concat({ ... }, " ") .. ": " .. out .. err)
  return out
end

-- Runs the CLI commands given (each a list of arguments, its first entry
-- optionally a number: seconds to sleep before) at once, in the
-- background; returns each one's output and exit status.
local function par(env, ...)
  local parts, cmds = {}, { ... }
  for i, args in ipairs(cmds) do
    local a, delay = {}, ""
    for j, x in ipairs(args) do
      if j == 1 and type(x) == "number" then
        delay = ("sleep %s; "):format(x)
      else
        a[#a + 1] = jr.quote(x)
      end
    end
    parts[#parts + 1] = ("(%s%s -c %s %s >%s 2>&1; echo \"exit $?\" >>%s) &"):format(
      delay, jr.quote(jr.bin), jr.quote(env.config_file), table.concat(a, " "),
      jr.quote(env.dir .. "/par" .. i .. ".out"), jr.quote(env.dir .. "/par" .. i .. ".out"))
  end
  os.execute("cd " .. jr.quote(env.dir) .. " && " .. table.concat(parts, " ") .. " wait")
  local res = {}
  for i = 1, #cmds do
    local s = jr.read_file(env.dir .. "/par" .. i .. ".out") or ""
    res[i] = { out = s, code = tonumber(s:match("exit (%d+)%s*$")) }
    os.remove(env.dir .. "/par" .. i .. ".out")
  end
  return res
end

-- Whether `sequences --json` says key k is blocked (false when not listed).
local function seq_blocked(env, k)
  local out = cli_ok(env, "sequences", "--json")
  for _, x in ipairs(cjson.decode(out)) do
    if x.key == k then return x.blocked == true end
  end
  return false
end

-- Waits until job id is dead.
local function dead(env, id)
  return env:wait_state(id, "dead", 30)
end

for _, backend in ipairs(jr.backends()) do
describe(backend .. " retry and rerun of sequence jobs:", function()
  local env = jr.test_env(backend, { config = "concurrency = 4" })

  it("puts a retried skipped-dead job behind the running one and the pending ones", function()
    env:script("step", STEP)
    env:start()
    local a = pushp(env, "k", { n = 1, fail = true }, "--on-failure", "skip")
    local b = pushp(env, "k", { n = 2, hold = true })
    local c = pushp(env, "k", { n = 3 })
    dead(env, a)
    env:wait_state(b, "running", 20)
    assert.equal("waiting", env:job(c).state)
    heal(env, "k", 1)
    assert.matches("1", cli_ok(env, "dead", "retry", tostring(a)))
    assert.equal("waiting", env:job(a).state)
    local d = pushp(env, "k", { n = 4 })
    assert.equal("waiting", env:job(d).state)
    open_gate(env, "k", 2)
    jr.wait_for(function() return ok_count(env, "k") == 4 end, 30, "all four ran")
    local done, overlap = check_order(env, "k")
    assert.are.same({ 2, 3, 1, 4 }, done)
    assert.is_false(overlap, dump(env))
  end)

  it("never runs a retried job beside the running one when it ends as the retry lands", function()
    env:script("step", STEP)
    env:start()
    local keys = {}
    for i = 1, 8 do
      local k = "r" .. i
      keys[i] = k
      local a = pushp(env, k, { n = 1, fail = true }, "--on-failure", "skip")
      local b = pushp(env, k, { n = 2, hold = true })
      dead(env, a)
      env:wait_state(b, "running", 20)
      heal(env, k, 1)
      -- the gate opens and the retry lands within a few ms of each other
      jr.write_file(env.dir .. "/opener.sh", ("sleep %s; touch %s"):format(
        (i - 1) * 0.01, jr.quote(("%s/gate-%s-2"):format(env.dir, k))))
      os.execute("sh " .. jr.quote(env.dir .. "/opener.sh") .. " &")
      local r = par(env, { 0.03, "dead", "retry", tostring(a) })
      assert.equal(0, r[1].code, r[1].out)
      jr.wait_for(function() return ok_count(env, k) == 2 end, 30, k .. " ran")
    end
    for _, k in ipairs(keys) do
      local done, overlap = check_order(env, k)
      assert.are.same({ 2, 1 }, done)
      assert.is_false(overlap, dump(env))
      assert.equal(2, starts(env, k, 1), dump(env))
    end
  end)

  it("runs a job retried twice at once from two shells once, behind the holder", function()
    env:script("step", STEP)
    env:start()
    local a = pushp(env, "k", { n = 1, fail = true }, "--on-failure", "skip")
    local b = pushp(env, "k", { n = 2, hold = true })
    dead(env, a)
    env:wait_state(b, "running", 20)
    heal(env, "k", 1)
    local r = par(env, { "dead", "retry", tostring(a) }, { "dead", "retry", tostring(a) },
                  { "dead", "retry", tostring(a) })
    -- one requeues it; the others say it is not dead (exit 1)
    local total = 0
    for _, x in ipairs(r) do
      if x.code ~= 0 then assert.matches("not in the dead queue", x.out) end
      total = total + tonumber(x.out:match("requeued (%d+)") or 0)
    end
    assert.equal(1, total, r[1].out .. r[2].out .. r[3].out)
    assert.equal("waiting", env:job(a).state)
    local c = pushp(env, "k", { n = 3 })
    open_gate(env, "k", 2)
    jr.wait_for(function() return ok_count(env, "k") == 3 end, 30, "all ran")
    jr.sleep(0.5)
    local done, overlap = check_order(env, "k")
    assert.are.same({ 2, 1, 3 }, done)
    assert.is_false(overlap, dump(env))
    assert.equal(2, starts(env, "k", 1))
    env:wait_state(c, "completed", 10)
  end)

  it("runs a job retried twice at once in an otherwise empty sequence once", function()
    env:script("step", STEP)
    env:start()
    local a = pushp(env, "k", { n = 1, fail = true }, "--on-failure", "skip")
    dead(env, a)
    heal(env, "k", 1)
    local r = par(env, { "dead", "retry", tostring(a) }, { "dead", "retry", tostring(a) })
    local total = 0
    for _, x in ipairs(r) do
      if x.code ~= 0 then assert.matches("not in the dead queue", x.out) end
      total = total + tonumber(x.out:match("requeued (%d+)") or 0)
    end
    assert.equal(1, total, r[1].out .. r[2].out)
    local b = pushp(env, "k", { n = 2 })
    jr.wait_for(function() return ok_count(env, "k") == 2 end, 30, "both ran")
    jr.sleep(0.5)
    local done, overlap = check_order(env, "k")
    assert.are.same({ 1, 2 }, done)
    assert.is_false(overlap, dump(env))
    assert.equal(2, starts(env, "k", 1))
    env:wait_state(b, "completed", 10)
  end)

  it("queues a retried job at once in an empty sequence and a push right after waits for it", function()
    env:script("step", STEP)
    env:start()
    local a = pushp(env, "k", { n = 1, fail = true, hold = true }, "--on-failure", "skip")
    open_gate(env, "k", 1)
    dead(env, a)
    -- no runner meanwhile: the states are the transaction's
    assert.equal(0, env:stop())
    cli_ok(env, "dead", "retry", tostring(a))
    assert.equal("queued", env:job(a).state)
    local b = pushp(env, "k", { n = 2 })
    assert.equal("waiting", env:job(b).state)
    env:start()
    env:wait_state(a, "running", 20)
    assert.equal("waiting", env:job(b).state)
    heal(env, "k", 1)
    open_gate(env, "k", 1)
    jr.wait_for(function() return ok_count(env, "k") == 2 end, 30, "both ran")
    local done, overlap = check_order(env, "k")
    assert.are.same({ 1, 2 }, done)
    assert.is_false(overlap, dump(env))
  end)

  it("keeps order when retry --all runs while pushes into the sequence go on", function()
    env:script("step", STEP)
    env:start()
    local ids = {}
    for n = 1, 30 do
      ids[n] = pushp(env, "k", { n = n, fail = true }, "--on-failure", "skip")
    end
    local holder = pushp(env, "k", { n = 100, hold = true })
    jr.wait_for(function() return env:count("dead") == 30 end, 60, "30 dead")
    env:wait_state(holder, "running", 20)
    jr.write_file(env.dir .. "/heal-all", "x")
    -- retry --all in the background while pushes go on
    local st = env.dir .. "/all.status"
    os.execute(("sh -c %s >/dev/null 2>&1 &"):format(jr.quote(("cd %s && %s -c %s dead retry --all > %s 2>&1; echo $? > %s"):format(
      jr.quote(env.dir), jr.quote(jr.bin), jr.quote(env.config_file),
      jr.quote(env.dir .. "/all.out"), jr.quote(st)))))
    local pushed = {}
    for n = 200, 209 do pushed[#pushed + 1] = pushp(env, "k", { n = n }) end
    jr.wait_for(function() return (jr.read_file(st) or ""):match("%d") end, 60, "retry --all ended")
    assert.equal("0", jr.read_file(st):match("%d+"), jr.read_file(env.dir .. "/all.out"))
    open_gate(env, "k", 100)
    jr.wait_for(function() return ok_count(env, "k") == 41 end, 90, "41 ran")
    jr.sleep(0.5)
    local done, overlap = check_order(env, "k")
    assert.is_false(overlap, dump(env))
    assert.equal(41, #done, dump(env))
    -- the retried ones in push order among themselves, the pushes likewise
    local r, p = {}, {}
    for _, n in ipairs(done) do
      if n <= 30 then r[#r + 1] = n elseif n >= 200 then p[#p + 1] = n end
    end
    local want_r, want_p = {}, {}
    for n = 1, 30 do want_r[n] = n end
    for n = 200, 209 do want_p[#want_p + 1] = n end
    assert.are.same(want_r, r)
    assert.are.same(want_p, p)
    assert.equal(100, done[1])
  end)

  it("reruns a completed sequence job at the end, behind the holder", function()
    env:script("step", STEP)
    env:start()
    local a = pushp(env, "k", { n = 1 })
    env:wait_state(a, "completed", 20)
    local b = pushp(env, "k", { n = 2, hold = true })
    env:wait_state(b, "running", 20)
    local c = pushp(env, "k", { n = 3 })
    cli_ok(env, "rerun", tostring(a))
    assert.equal("waiting", env:job(a).state)
    local d = pushp(env, "k", { n = 4 })
    open_gate(env, "k", 2)
    jr.wait_for(function() return ok_count(env, "k") == 5 end, 30, "all ran")
    local done, overlap = check_order(env, "k")
    assert.are.same({ 1, 2, 3, 1, 4 }, done)
    assert.is_false(overlap, dump(env))
    env:wait_state(d, "completed", 10)
  end)

  it("reruns a cancelled sequence job at the end, over HTTP answering waiting", function()
    env:script("step", STEP)
    local base = H.start(env, "concurrency = 4")
    local a = pushp(env, "k", { n = 1, hold = true })
    local b = pushp(env, "k", { n = 2 })
    env:wait_state(a, "running", 20)
    cli_ok(env, "cancel", tostring(b))
    env:wait_state(b, "cancelled", 20)
    local c = pushp(env, "k", { n = 3 })
    local j = H.json(base .. "/api/jobs/" .. b .. "/rerun", 200, { method = "POST" })
    assert.equal("waiting", j.state)
    assert.equal("waiting", env:job(b).state)
    open_gate(env, "k", 1)
    jr.wait_for(function() return ok_count(env, "k") == 3 end, 30, "all ran")
    local done, overlap = check_order(env, "k")
    assert.are.same({ 1, 3, 2 }, done)
    assert.is_false(overlap, dump(env))
    -- a completed one over HTTP in an empty sequence: queued at once
    env:wait_state(b, "completed", 20)
    j = H.json(base .. "/api/jobs/" .. c .. "/rerun", 200, { method = "POST" })
    assert.equal("queued", j.state)
    jr.wait_for(function() return ok_count(env, "k") == 4 end, 30, "c again")
  end)

  it("retries over POST /api/dead/retry and /api/bulk/retry to the sequence's end", function()
    env:script("step", STEP)
    local base = H.start(env, "concurrency = 4")
    local a = pushp(env, "k", { n = 1, fail = true }, "--on-failure", "skip")
    local b = pushp(env, "k", { n = 2, fail = true }, "--on-failure", "skip")
    local c = pushp(env, "k", { n = 3, fail = true }, "--on-failure", "dead")
    dead(env, a); dead(env, b); dead(env, c)
    -- pushed after c ended: it runs (pushed before, it would end dead)
    local h = pushp(env, "k", { n = 4, hold = true })
    env:wait_state(h, "running", 20)
    jr.write_file(env.dir .. "/heal-all", "x")
    local j = H.json(base .. "/api/dead/retry", 200, { body = cjson.encode({ ids = { b, a } }) })
    assert.equal(2, j.retried)
    j = H.json(base .. "/api/bulk/retry?name=step", 200, { method = "POST" })
    assert.equal(1, j.retried)
    assert.equal("waiting", env:job(a).state)
    assert.equal("waiting", env:job(b).state)
    assert.equal("waiting", env:job(c).state)
    open_gate(env, "k", 4)
    jr.wait_for(function() return ok_count(env, "k") == 4 end, 30, "all ran")
    local done, overlap = check_order(env, "k")
    assert.is_false(overlap, dump(env))
    assert.equal(4, done[1])
    assert.equal(3, done[4])
  end)

  it("retries a dead job whose sequence's other jobs were cancelled and purged", function()
    env:script("step", STEP)
    env:start()
    local a = pushp(env, "k", { n = 1, fail = true }, "--on-failure", "skip")
    local b = pushp(env, "k", { n = 2, fail = true }, "--on-failure", "skip")
    local c = pushp(env, "k", { n = 3, hold = true })
    local d = pushp(env, "k", { n = 4 })
    dead(env, a); dead(env, b)
    env:wait_state(c, "running", 20)
    cli_ok(env, "cancel", tostring(d))
    cli_ok(env, "cancel", tostring(c))
    env:wait_state(c, "cancelled", 20)
    cli_ok(env, "dead", "purge")
    assert.is_nil(env:job(b))
    -- a dead one again, then retried in the sequence left with nothing
    local e = pushp(env, "k", { n = 5, fail = true }, "--on-failure", "skip")
    dead(env, e)
    heal(env, "k", 5)
    cli_ok(env, "dead", "retry", tostring(e))
    local f = pushp(env, "k", { n = 6 })
    jr.wait_for(function() return ok_count(env, "k") == 2 end, 30, "e and f ran")
    -- job 3 was cancelled running: its start has no end
    local done, overlap = check_order(env, "k", true)
    assert.are.same({ 5, 6 }, done)
    assert.is_false(overlap, dump(env))
    env:wait_state(f, "completed", 10)
  end)

  it("retries a dead job of a reused key behind the key's new jobs", function()
    env:script("step", STEP)
    env:start()
    local a = pushp(env, "k", { n = 1, fail = true }, "--on-failure", "skip")
    local b = pushp(env, "k", { n = 2 })
    env:wait_state(b, "completed", 20)
    -- the key used again, long after
    local c = pushp(env, "k", { n = 3, hold = true })
    local d = pushp(env, "k", { n = 4 })
    env:wait_state(c, "running", 20)
    heal(env, "k", 1)
    cli_ok(env, "dead", "retry", tostring(a))
    assert.equal("waiting", env:job(a).state)
    open_gate(env, "k", 3)
    jr.wait_for(function() return ok_count(env, "k") == 4 end, 30, "all ran")
    local done, overlap = check_order(env, "k")
    assert.are.same({ 2, 3, 4, 1 }, done)
    assert.is_false(overlap, dump(env))
    env:wait_state(d, "completed", 10)
  end)

  it("keeps a retried blocked head at the head, by dead retry and by rerun", function()
    env:script("step", STEP)
    env:start()
    for _, how in ipairs({ "retry", "rerun" }) do
      local k = "b" .. how
      local a = pushp(env, k, { n = 1, fail = true })
      local b = pushp(env, k, { n = 2 })
      dead(env, a)
      assert.equal("waiting", env:job(b).state)
      heal(env, k, 1)
      if how == "retry" then cli_ok(env, "dead", "retry", tostring(a))
      else cli_ok(env, "rerun", tostring(a)) end
      local c = pushp(env, k, { n = 3 })
      jr.wait_for(function() return ok_count(env, k) == 3 end, 30, k .. " ran")
      local done, overlap = check_order(env, k)
      assert.are.same({ 1, 2, 3 }, done, how)
      assert.is_false(overlap, dump(env))
      env:wait_state(c, "completed", 10)
    end
  end)

  -- `sequences skip KEY` and `dead retry ID` of the blocked dead head
  -- started at the same moment (two shells). On PostgreSQL the retry
  -- failed, exit 1, "job 16 is not in the dead queue" though job 16 was
  -- dead throughout, and it never ran (three runs of three): the head's
  -- retry left it as its sequence's head, the skip made it one the
  -- sequence went on past, and the plain retry then left it too. A short
  -- retry now looks for such jobs once more.
  it("runs every job once when skip or unblock races a retry of the blocked head", function()
    env:script("step", STEP)
    env:start()
    local keys = {}
    for i = 1, 6 do
      local k = "u" .. i
      keys[#keys + 1] = k
      local a = pushp(env, k, { n = 1, fail = true })
      pushp(env, k, { n = 2 })
      pushp(env, k, { n = 3 })
      dead(env, a)
      heal(env, k, 1)
      local op = (i % 2 == 0) and "skip" or "unblock"
      local r = par(env, { "sequences", op, k }, { (i % 3) * 0.01, "dead", "retry", tostring(a) })
      -- one of them did it; the other may say the sequence is not blocked
      assert.is_true(r[1].code == 0 or r[1].code == 5, r[1].out)
      assert.is_true(r[2].code == 0 or r[2].out:find("not in the dead queue", 1, true) ~= nil, r[2].out)
      -- exactly one of them acted
      local acted = (r[1].code == 0 and 1 or 0) + tonumber(r[2].out:match("requeued (%d+)") or 0)
      if op == "unblock" then assert.equal(1, acted, r[1].out .. r[2].out) end
      local ok = pcall(jr.wait_for, function() return ok_count(env, k) == 3 end, 15)
      if not ok then
        local j = env:job(a)
        error(("%s (%s vs retry): job %d is %s (%s); %s said: %s; retry said: %s; sequences: %s"):format(
          k, op, a, j.state, tostring(j.last_error):sub(1, 40), op, r[1].out, r[2].out,
          (cli_ok(env, "sequences"))))
      end
    end
    jr.sleep(1)
    for _, k in ipairs(keys) do
      local done, overlap = check_order(env, k)
      assert.is_false(overlap, dump(env))
      assert.equal(3, #done, k .. dump(env))
      assert.equal(2, starts(env, k, 1), k .. dump(env))
      table.sort(done)
      assert.are.same({ 1, 2, 3 }, done)
    end
    local out = cli_ok(env, "sequences", "--json")
    assert.are.same({}, cjson.decode(out))
  end)

  it("reruns a queued head in its place", function()
    env:script("step", STEP)
    local a = pushp(env, "k", { n = 1 })
    local b = pushp(env, "k", { n = 2 })
    cli_ok(env, "rerun", tostring(a))
    assert.equal("queued", env:job(a).state)
    assert.equal("waiting", env:job(b).state)
    env:start()
    jr.wait_for(function() return ok_count(env, "k") == 2 end, 30, "both ran")
    local done, overlap = check_order(env, "k")
    assert.are.same({ 1, 2 }, done)
    assert.is_false(overlap, dump(env))
  end)

  it("reruns a completed job asked twice at once: one run at a time, the sequence goes on", function()
    env:script("step", STEP)
    env:start()
    local a = pushp(env, "k", { n = 1, ms = 200 })
    env:wait_state(a, "completed", 20)
    local h = pushp(env, "k", { n = 2, hold = true })
    env:wait_state(h, "running", 20)
    local r = par(env, { "rerun", tostring(a) }, { "rerun", tostring(a) })
    local okc = 0
    for _, x in ipairs(r) do if x.code == 0 then okc = okc + 1 end end
    assert.equal(1, okc, r[1].out .. r[2].out)
    local c = pushp(env, "k", { n = 3 })
    open_gate(env, "k", 2)
    jr.wait_for(function() return ok_count(env, "k") == 4 end, 30, "all ran")
    jr.sleep(0.5)
    local done, overlap = check_order(env, "k")
    assert.are.same({ 1, 2, 1, 3 }, done)
    assert.is_false(overlap, dump(env))
    env:wait_state(c, "completed", 10)
  end)

  it("says clearly what is wrong with a bad id", function()
    env:script("step", STEP)
    local a = pushp(env, "k", { n = 1, hold = true })
    local b = pushp(env, "k", { n = 2 })
    local out, err, code = env:cli("rerun", "999999")
    assert.equal(5, code, out .. err)
    assert.matches("999999", out .. err)
    out, err, code = env:cli("dead", "retry", "abc")
    assert.is_not.equal(0, code)
    assert.matches("abc", out .. err)
    out, err, code = env:cli("dead", "retry", "999999")
    assert.matches("0", out .. err)
    -- a waiting job of a sequence is not rerun; a queued one not retried
    out, err, code = env:cli("rerun", tostring(b))
    assert.is_not.equal(0, code, out .. err)
    assert.matches("waiting", out .. err)
    assert.equal("waiting", env:job(b).state)
    out, err, code = env:cli("dead", "retry", tostring(a))
    assert.matches("0", out .. err)
    assert.equal("queued", env:job(a).state)
    local base = H.start(env)
    env:wait_state(a, "running", 20)
    local st = H.req(base .. "/api/jobs/999999/rerun", { method = "POST", token = true })
    assert.equal(404, st)
    st = H.req(base .. "/api/jobs/999999/retry", { method = "POST", token = true })
    assert.is_true(st == 404 or st == 200)
    st = H.req(base .. "/api/jobs/abc/rerun", { method = "POST", token = true })
    assert.is_true(st == 400 or st == 404)
    local body
    st, body = H.req(base .. "/api/jobs/" .. b .. "/rerun", { method = "POST", token = true })
    assert.equal(400, st, body)
    -- and a running one
    st, body = H.req(base .. "/api/jobs/" .. a .. "/rerun", { method = "POST", token = true })
    assert.equal(400, st, body)
    open_gate(env, "k", 1)
    jr.wait_for(function() return ok_count(env, "k") == 2 end, 30, "both ran")
  end)

  it("retries 600 dead jobs of one sequence with --all: each runs once, in order", function()
    env:script("step", STEP)
    env:start()
    local q = jr.client(env)
    local N = 600
    local ids = {}
    for n = 1, N do
      ids[n] = assert(q:push("step", { k = "big", n = n, fail = true },
        { sequence = "big", on_failure = "skip" }))
    end
    local h = assert(q:push("step", { k = "big", n = 9999, hold = true }, { sequence = "big" }))
    jr.wait_for(function() return env:count("dead") == N end, 240, N .. " dead")
    env:wait_state(h, "running", 30)
    jr.write_file(env.dir .. "/heal-all", "x")
    local out = cli_ok(env, "dead", "retry", "--all")
    assert.matches(tostring(N), out)
    assert.equal(N, env:count("waiting"))
    local last = assert(q:push("step", { k = "big", n = 10000 }, { sequence = "big" }))
    open_gate(env, "big", 9999)
    jr.wait_for(function() return ok_count(env, "big") == N + 2 end, 300, "all ran")
    jr.sleep(0.5)
    local done, overlap = check_order(env, "big")
    assert.is_false(overlap)
    local want = { 9999 }
    for n = 1, N do want[#want + 1] = n end
    want[#want + 1] = 10000
    assert.are.same(want, done)
    for n = 1, N do assert.equal(2, starts(env, "big", n)) end
    env:wait_state(last, "completed", 10)
  end)

  it("never queues both a retried job and a push racing it into an empty sequence", function()
    env:script("step", STEP)
    env:start()
    for i = 1, 10 do
      local k = "e" .. i
      local a = pushp(env, k, { n = 1, fail = true, hold = true }, "--on-failure", "skip")
      open_gate(env, k, 1)
      dead(env, a)
      heal(env, k, 1)
      local r = par(env, { "dead", "retry", tostring(a) },
        { (i % 4) * 0.005, "push", "step", cjson.encode({ k = k, n = 2, hold = true }), "--sequence", k })
      assert.equal(0, r[1].code, r[1].out)
      assert.equal(0, r[2].code, r[2].out)
      local b = tonumber(r[2].out:match("%d+"))
      jr.sleep(0.3)
      local sa, sb = env:job(a).state, env:job(b).state
      assert.is_true(sa == "waiting" or sb == "waiting",
        ("%s: retried %d is %s, pushed %d is %s"):format(k, a, sa, b, sb))
      open_gate(env, k, 1)
      open_gate(env, k, 2)
      jr.wait_for(function() return ok_count(env, k) == 2 end, 30, k .. " ran")
      local _, overlap = check_order(env, k)
      assert.is_false(overlap, dump(env))
    end
  end)

  it("never queues two dead jobs of an empty sequence retried at once from two shells", function()
    env:script("step", STEP)
    env:start()
    for i = 1, 8 do
      local k = "t" .. i
      local a = pushp(env, k, { n = 1, fail = true, hold = true }, "--on-failure", "skip")
      local b = pushp(env, k, { n = 2, fail = true, hold = true }, "--on-failure", "skip")
      open_gate(env, k, 1)
      dead(env, a)
      open_gate(env, k, 2)
      dead(env, b)
      heal(env, k, 1)
      heal(env, k, 2)
      local r = par(env, { "dead", "retry", tostring(a) }, { (i % 4) * 0.005, "dead", "retry", tostring(b) })
      assert.equal(0, r[1].code, r[1].out)
      assert.equal(0, r[2].code, r[2].out)
      jr.sleep(0.3)
      local sa, sb = env:job(a).state, env:job(b).state
      assert.is_true(sa == "waiting" or sb == "waiting",
        ("%s: retried %d is %s, retried %d is %s"):format(k, a, sa, b, sb))
      open_gate(env, k, 1)
      open_gate(env, k, 2)
      jr.wait_for(function() return ok_count(env, k) == 2 end, 30, k .. " ran")
      local _, overlap = check_order(env, k)
      assert.is_false(overlap, dump(env))
    end
  end)

  it("never queues both a rerun completed job and a push racing it into an empty sequence", function()
    env:script("step", STEP)
    env:start()
    for i = 1, 8 do
      local k = "c" .. i
      local a = pushp(env, k, { n = 1, hold = true })
      open_gate(env, k, 1)
      env:wait_state(a, "completed", 20)
      local r = par(env, { "rerun", tostring(a) },
        { (i % 4) * 0.005, "push", "step", cjson.encode({ k = k, n = 2, hold = true }), "--sequence", k })
      assert.equal(0, r[1].code, r[1].out)
      assert.equal(0, r[2].code, r[2].out)
      local b = tonumber(r[2].out:match("%d+"))
      jr.sleep(0.3)
      local sa, sb = env:job(a).state, env:job(b).state
      assert.is_true(sa == "waiting" or sb == "waiting",
        ("%s: rerun %d is %s, pushed %d is %s"):format(k, a, sa, b, sb))
      open_gate(env, k, 1)
      open_gate(env, k, 2)
      jr.wait_for(function() return ok_count(env, k) == 3 end, 30, k .. " ran")
      local _, overlap = check_order(env, k)
      assert.is_false(overlap, dump(env))
    end
  end)

  it("retries with --all a dead job and the jobs it ended dead, in their order", function()
    env:script("step", STEP)
    -- each with on_failure dead: see the pending case below for the
    -- default on the jobs behind; pushed before a runner starts
    local a = pushp(env, "k", { n = 1, fail = true }, "--on-failure", "dead")
    local b = pushp(env, "k", { n = 2 }, "--on-failure", "dead")
    local c = pushp(env, "k", { n = 3 }, "--on-failure", "dead")
    env:start()
    dead(env, a); dead(env, b); dead(env, c)
    assert.matches(tostring(a), env:job(b).last_error)
    local h = pushp(env, "k", { n = 4, hold = true })
    env:wait_state(h, "running", 20)
    heal(env, "k", 1)
    cli_ok(env, "dead", "retry", "--all")
    open_gate(env, "k", 4)
    jr.wait_for(function() return ok_count(env, "k") == 4 end, 30, "all ran")
    local done, overlap = check_order(env, "k")
    assert.are.same({ 4, 1, 2, 3 }, done)
    assert.is_false(overlap, dump(env))
  end)

  -- on_failure "dead": the jobs behind the dead one end dead, each by its
  -- own on_failure in turn (docs/queues.md, "Sequences"): all pushed with
  -- "dead", the rest ends dead and the next push runs; one behind pushed
  -- with the default "block" ends dead and then blocks the sequence (the
  -- red team read the docs' table as all the rest whatever theirs: the
  -- docs now say which).
  it("ends every job behind a dead on_failure=dead one when all are pushed so, and the next push runs", function()
    env:script("step", STEP)
    local a = pushp(env, "k", { n = 1, fail = true }, "--on-failure", "dead")
    local b = pushp(env, "k", { n = 2 }, "--on-failure", "dead")
    local c = pushp(env, "k", { n = 3 }, "--on-failure", "dead")
    env:start()
    dead(env, a); dead(env, b); dead(env, c)
    local d = pushp(env, "k", { n = 4 })
    env:wait_state(d, "completed", 20)
  end)

  it("blocks at a job behind pushed with block, ended dead by the one before", function()
    env:script("step", STEP)
    local a = pushp(env, "k", { n = 1, fail = true }, "--on-failure", "dead")
    local b = pushp(env, "k", { n = 2 })
    local c = pushp(env, "k", { n = 3 })
    env:start()
    dead(env, a); dead(env, b)
    jr.sleep(1)
    assert.equal("waiting", env:job(c).state)
    local out, err, code = env:cli("sequences", "--blocked")
    assert.equal(0, code, out .. err)
    assert.matches("k", out)
  end)

  it("reruns a job expired in its sequence at the end", function()
    env:script("step", STEP)
    env:start()
    local a = pushp(env, "k", { n = 1, hold = true })
    local b = pushp(env, "k", { n = 2 }, "--expires-in", "1s")
    env:wait_state(a, "running", 20)
    jr.sleep(1.5)
    open_gate(env, "k", 1)
    env:wait_state(b, "expired", 20)
    local c = pushp(env, "k", { n = 3, hold = true })
    env:wait_state(c, "running", 20)
    local out, err, code = env:cli("rerun", tostring(b))
    if code ~= 0 then out, err, code = env:cli("dead", "retry", tostring(b)) end
    assert.equal(0, code, out .. err)
    assert.equal("waiting", env:job(b).state)
    open_gate(env, "k", 3)
    jr.wait_for(function() return ok_count(env, "k") == 3 end, 30, "all ran")
    local done, overlap = check_order(env, "k")
    assert.are.same({ 1, 3, 2 }, done)
    assert.is_false(overlap, dump(env))
  end)

  it("reruns a skipped-dead job with a new payload at the end", function()
    env:script("step", STEP)
    env:start()
    local a = pushp(env, "k", { n = 1, fail = true }, "--on-failure", "skip")
    local h = pushp(env, "k", { n = 2, hold = true })
    dead(env, a)
    env:wait_state(h, "running", 20)
    cli_ok(env, "rerun", tostring(a), "--payload", cjson.encode({ k = "k", n = 1 }))
    assert.equal("waiting", env:job(a).state)
    local c = pushp(env, "k", { n = 3 })
    open_gate(env, "k", 2)
    jr.wait_for(function() return ok_count(env, "k") == 3 end, 30, "all ran")
    local done, overlap = check_order(env, "k")
    assert.are.same({ 2, 1, 3 }, done)
    assert.is_false(overlap, dump(env))
    env:wait_state(c, "completed", 10)
  end)

  it("retries a skipped blocked head at the end with on_failure skip", function()
    env:script("step", STEP)
    env:start()
    local a = pushp(env, "k", { n = 1, fail = true })
    local b = pushp(env, "k", { n = 2, hold = true })
    dead(env, a)
    cli_ok(env, "sequences", "skip", "k")
    env:wait_state(b, "running", 20)
    cli_ok(env, "dead", "retry", tostring(a))
    assert.equal("waiting", env:job(a).state)
    local c = pushp(env, "k", { n = 3 })
    open_gate(env, "k", 2)
    -- a fails again: as one skipped, its on_failure is skip, c runs
    dead(env, a)
    env:wait_state(c, "completed", 20)
    local done, overlap = check_order(env, "k")
    assert.are.same({ 2, 3 }, done)
    assert.is_false(overlap, dump(env))
    assert.is_false(seq_blocked(env, "k"))
  end)

  it("retries with --all a skipped-dead job and a blocked head of one sequence", function()
    env:script("step", STEP)
    env:start()
    local a = pushp(env, "k", { n = 1, fail = true }, "--on-failure", "skip")
    local b = pushp(env, "k", { n = 2, fail = true })
    local c = pushp(env, "k", { n = 3 })
    dead(env, a); dead(env, b)
    assert.equal("waiting", env:job(c).state)
    jr.write_file(env.dir .. "/heal-all", "x")
    cli_ok(env, "dead", "retry", "--all")
    jr.wait_for(function() return ok_count(env, "k") == 3 end, 30, "all ran")
    local done, overlap = check_order(env, "k")
    -- b keeps its place at the head; a goes to the end
    assert.are.same({ 2, 3, 1 }, done)
    assert.is_false(overlap, dump(env))
  end)

  it("retries a skipped-dead job while another dead head blocks the sequence", function()
    env:script("step", STEP)
    env:start()
    local a = pushp(env, "k", { n = 1, fail = true }, "--on-failure", "skip")
    local b = pushp(env, "k", { n = 2, fail = true })
    local c = pushp(env, "k", { n = 3 })
    dead(env, a); dead(env, b)
    heal(env, "k", 1)
    cli_ok(env, "dead", "retry", tostring(a))
    jr.sleep(0.5)
    assert.equal("waiting", env:job(a).state)
    assert.equal("waiting", env:job(c).state)
    assert.is_true(seq_blocked(env, "k"))
    heal(env, "k", 2)
    cli_ok(env, "sequences", "unblock", "k")
    jr.wait_for(function() return ok_count(env, "k") == 3 end, 30, "all ran")
    local done, overlap = check_order(env, "k")
    assert.are.same({ 2, 3, 1 }, done)
    assert.is_false(overlap, dump(env))
  end)

  it("lets the jobs behind a retried job run when it is cancelled while waiting", function()
    env:script("step", STEP)
    env:start()
    local a = pushp(env, "k", { n = 1, fail = true }, "--on-failure", "skip")
    local h = pushp(env, "k", { n = 2, hold = true })
    dead(env, a)
    env:wait_state(h, "running", 20)
    cli_ok(env, "dead", "retry", tostring(a))
    local d = pushp(env, "k", { n = 3 })
    cli_ok(env, "cancel", tostring(a))
    env:wait_state(a, "cancelled", 20)
    open_gate(env, "k", 2)
    env:wait_state(d, "completed", 20)
    local done, overlap = check_order(env, "k")
    assert.are.same({ 2, 3 }, done)
    assert.is_false(overlap, dump(env))
    assert.equal(1, starts(env, "k", 1))
  end)

  -- N dead jobs (on_failure skip) of sequence k pushed by the client,
  -- then a holder running; returns the holder's id.
  local function many_dead(n, k)
    local q = jr.client(env)
    for i = 1, n do
      assert(q:push("step", { k = k, n = i, fail = true }, { sequence = k, on_failure = "skip" }))
    end
    local h = assert(q:push("step", { k = k, n = 9999, hold = true }, { sequence = k }))
    jr.wait_for(function() return env:count("dead") == n end, 240, n .. " dead")
    env:wait_state(h, "running", 30)
    jr.write_file(env.dir .. "/heal-all", "x")
    return h
  end

  local function check_big(n, k)
    open_gate(env, k, 9999)
    jr.wait_for(function() return ok_count(env, k) == n + 1 end, 300, "all ran")
    jr.sleep(0.5)
    local done, overlap = check_order(env, k)
    assert.is_false(overlap)
    assert.equal(9999, done[1])
    local bad
    for i = 1, n do
      if done[i + 1] ~= i then bad = bad or ("position %d: job %s"):format(i, tostring(done[i + 1])) end
    end
    -- the order run, as ascending runs "first-last"
    local runs, i = {}, 2
    while i <= #done do
      local j = i
      while j < #done and done[j + 1] == done[j] + 1 do j = j + 1 end
      runs[#runs + 1] = done[i] .. "-" .. done[j]
      i = j + 1
    end
    assert.is_nil(bad, "retried jobs out of push order: ran " ..
      table.concat(runs, ", "):sub(1, 200))
    for i = 1, n do assert.equal(2, starts(env, k, i)) end
  end

  -- 600 dead jobs: more than a page of a bulk change (JR_BULK_ROWS, 500).
  -- Two `dead retry --all` started 50 ms apart over 1100 dead jobs of
  -- one sequence (on_failure skip, a holder running). On PostgreSQL one
  -- failed, exit 1, "retrying dead jobs: deadlock detected" (three runs
  -- of three); the moves to the sequence's end now take turns on an
  -- advisory lock. SQLite: both succeed, each job requeued once, in order.
  it("retries 600 dead jobs of one sequence from two retry --all at once: each once, in order", function()
    env:script("step", STEP)
    env:start()
    local N = 600
    many_dead(N, "two")
    local r = par(env, { "dead", "retry", "--all" }, { 0.05, "dead", "retry", "--all" })
    local total = 0
    for _, x in ipairs(r) do
      assert.equal(0, x.code, x.out)
      total = total + tonumber(x.out:match("requeued (%d+)") or 0)
    end
    assert.equal(N, total, r[1].out .. r[2].out)
    check_big(N, "two")
  end)

  -- POST /api/bulk/retry?name=step (the dashboard's "Retry dead" on a
  -- filter) over 1100 dead jobs of one sequence (on_failure skip, a
  -- holder running) put them back at the sequence's end newest first, so
  -- they ran out of push order: on SQLite in reverse, 1100, 1099, ..., 1;
  -- on PostgreSQL page by page, 601-1100, then 101-600, then 1-100. A
  -- bulk retry now pages oldest first, as `dead retry --all` does.
  it("retries 600 dead jobs of one sequence by POST /api/bulk/retry in push order", function()
    env:script("step", STEP)
    local base = H.start(env, "concurrency = 4")
    local N = 600
    many_dead(N, "bulk")
    local j = H.json(base .. "/api/bulk/retry?name=step", 200, { method = "POST", max_time = 120 })
    assert.equal(N, j.retried)
    check_big(N, "bulk")
  end)

  it("retries 600 dead jobs of one sequence by POST /api/dead/retry all in push order", function()
    env:script("step", STEP)
    local base = H.start(env, "concurrency = 4")
    local N = 600
    many_dead(N, "dall")
    local j = H.json(base .. "/api/dead/retry", 200, { body = '{"all": true}', max_time = 120 })
    assert.equal(N, j.retried)
    check_big(N, "dall")
  end)

  -- (three runners on PostgreSQL; on SQLite the second and third exit at
  -- once, one runner a file)
  it("never runs two of a sequence when retries race ends and pushes across three runners", function()
    env:config("concurrency = 4")
    env:script("step", STEP)
    env:start(); env:start(); env:start()
    local keys = {}
    for i = 1, 8 do
      local k = "m" .. i
      keys[i] = k
      local a = pushp(env, k, { n = 1, fail = true }, "--on-failure", "skip")
      local b = pushp(env, k, { n = 2, hold = true })
      dead(env, a)
      env:wait_state(b, "running", 20)
      heal(env, k, 1)
      jr.write_file(env.dir .. "/opener.sh", ("sleep %s; touch %s"):format(
        (i % 4) * 0.01, jr.quote(("%s/gate-%s-2"):format(env.dir, k))))
      os.execute("sh " .. jr.quote(env.dir .. "/opener.sh") .. " &")
      local r = par(env, { 0.02, "dead", "retry", tostring(a) },
        { 0.02, "push", "step", cjson.encode({ k = k, n = 3 }), "--sequence", k })
      assert.equal(0, r[1].code, r[1].out)
      assert.equal(0, r[2].code, r[2].out)
    end
    for _, k in ipairs(keys) do
      jr.wait_for(function() return ok_count(env, k) == 3 end, 30, k .. " ran" .. dump(env))
      local done, overlap = check_order(env, k)
      assert.is_false(overlap, dump(env))
      assert.equal(2, done[1])
      assert.equal(2, starts(env, k, 1), dump(env))
    end
    jr.wait_for(function() return env:count_in("queued", "running", "waiting") == 0 end,
      30, "every job ended" .. dump(env))
  end)

  it("runs a blocked head once when HTTP unblock and HTTP retry race", function()
    env:script("step", STEP)
    local base = H.start(env, "concurrency = 4")
    local curl = function(path, delay)
      return ("(sleep %s; curl -s -m 20 -X POST -H %s -H 'Content-Type: application/json' %s) &"):format(
        delay, jr.quote("Authorization: Bearer " .. H.TOKEN), jr.quote(base .. path))
    end
    for i = 1, 6 do
      local k = "h" .. i
      local a = pushp(env, k, { n = 1, fail = true })
      pushp(env, k, { n = 2 })
      dead(env, a)
      heal(env, k, 1)
      local op = (i % 2 == 0) and "skip" or "unblock"
      os.execute("cd " .. jr.quote(env.dir) .. " && " ..
        curl("/api/sequences/" .. op .. "?key=" .. k, 0) .. " " ..
        curl("/api/jobs/" .. a .. "/retry", (i % 3) * 0.005) .. " wait >/dev/null")
      jr.wait_for(function() return ok_count(env, k) == 2 end, 20,
        k .. " (" .. op .. "): job " .. a .. " is " .. env:job(a).state .. dump(env))
      jr.sleep(0.3)
      local done, overlap = check_order(env, k)
      assert.is_false(overlap, dump(env))
      assert.equal(2, starts(env, k, 1), k .. dump(env))
    end
  end)

  it("keeps a retried job behind a holder whose runner was killed -9 as the retry landed", function()
    env:config("concurrency = 4, lease = 2")
    env:script("step", step_source(3))
    local r1 = env:start()
    local a = pushp(env, "k", { n = 1, fail = true }, "--on-failure", "skip", "--max-retries", "0")
    local b = pushp(env, "k", { n = 2, hold = true })
    dead(env, a)
    env:wait_state(b, "running", 20)
    -- PostgreSQL: two more runners, live as the kill and the retry land;
    -- SQLite takes one runner a file (its pid file): the next starts after
    if backend == "postgres" then env:start(); env:start() end
    heal(env, "k", 1)
    env:signal("KILL", r1)
    cli_ok(env, "dead", "retry", tostring(a))
    local c = pushp(env, "k", { n = 3 })
    if backend ~= "postgres" then
      jr.wait_for(function() return not env:alive(r1) end, 20, "runner 1 gone")
      env:start()
    end
    -- b is rescued and runs again (holding); a and c wait behind it
    jr.wait_for(function() return starts(env, "k", 2) == 2 end, 30, "b rescued" .. dump(env))
    assert.equal("waiting", env:job(a).state)
    assert.equal("waiting", env:job(c).state)
    open_gate(env, "k", 2)
    jr.wait_for(function() return ok_count(env, "k") == 3 end, 30, "all ran" .. dump(env))
    local done, overlap = check_order(env, "k", true)
    assert.are.same({ 2, 1, 3 }, done)
    assert.is_false(overlap, dump(env))
  end)

  -- on SQLite the runners follow one another (one runner a file: a
  -- second one started beside exits at once), on PostgreSQL three at once
  it("drains retried sequences with three runners, two killed -9 on the way", function()
    env:config("concurrency = 4, lease = 2")
    -- retries: a job whose runner was killed is not dead at its rescue
    env:script("step", step_source(3))
    local K, M = 4, 8
    for i = 1, K do
      for n = 1, M do
        pushp(env, "d" .. i, { n = n, fail = true, ms = 80 }, "--on-failure", "skip")
      end
    end
    local r1 = env:start()
    local r2 = env:start()
    env:start()
    jr.wait_for(function() return env:count("dead") == K * M end, 120, "all dead")
    jr.write_file(env.dir .. "/heal-all", "x")
    cli_ok(env, "dead", "retry", "--all")
    jr.sleep(0.3)
    env:signal("KILL", r1)
    env:start()
    jr.sleep(0.4)
    env:signal("KILL", r2)
    env:start()
    for i = 1, K do
      jr.wait_for(function()
        local seen = {}
        for _, n in ipairs((check_order(env, "d" .. i, true))) do seen[n] = true end
        for n = 1, M do if not seen[n] then return false end end
        return true
      end, 120, "d" .. i .. " all ran:" .. dump(env))
    end
    jr.wait_for(function() return env:count_in("queued", "running", "waiting") == 0 end,
      30, "every job ended" .. dump(env))
    for i = 1, K do
      local done, overlap = check_order(env, "d" .. i, true)
      assert.is_false(overlap, dump(env))
      -- a killed one may have run to its end before the kill lost its result
      local dedup = {}
      for _, n in ipairs(done) do if dedup[#dedup] ~= n then dedup[#dedup + 1] = n end end
      local want = {}
      for n = 1, M do want[n] = n end
      assert.are.same(want, dedup, dump(env))
    end
  end)
end)
end
