-- seq_sqlite_red_spec.lua - attacks on sequences (docs/queues.md,
-- "Sequences") on the SQLite engine, whose index holds only each
-- sequence's head and last job: cancels of the head, of a job in the
-- middle and of the last job followed by new pushes; several runners on
-- one file with a failing head and a runner killed mid-sequence;
-- on_conflict replace and cancel_running into a sequence; odd keys;
-- retention pruning the ended jobs of a sequence then a new push; a
-- schema-35 database with half-done sequences (SQLite only). On each
-- backend: the attacks hold the same promises on PostgreSQL.
local jr = require "jr"
local cjson = require "cjson"

-- A handler that records "start K N ATTEMPT" and "end K N ATTEMPT ok|fail"
-- in file seq; it fails the attempts its payload asks (fail = count),
-- holds while file "gate-N" is missing when its payload says hold, and
-- holds forever in a runner started with JR_HOLD set (a runner to kill);
-- a file "heal-N" ends the failures of job N;
-- a cancel during the hold records "end K N ATTEMPT cancelled".
local GATED = jr.RECORD .. [[
  local jobrunner = require "jobrunner"
  local function exists(p)
    local f = io.open(p)
    if f then f:close() end
    return f ~= nil
  end
  return { max_retries = 3, backoff = 0.3, handle = function(job)
    local p = job.payload
    record("seq", ("start %s %d %d"):format(p.k, p.n, job.attempt))
    local dir = os.getenv("PWD")
    -- a cancel raises in the wait: record its end before the job ends
    local ok, e = pcall(function()
      while os.getenv("JR_HOLD") or (p.hold and not exists(dir .. "/gate-" .. p.n)) do
        jobrunner.sleep(0.05)
      end
    end)
    if not ok then
      record("seq", ("end %s %d %d cancelled"):format(p.k, p.n, job.attempt))
      error(e)
    end
    -- a file "heal-N" ends the failures (a job retried by hand then succeeds)
    local failed = p.fail and job.attempt <= p.fail and not exists(dir .. "/heal-" .. p.n)
    record("seq", ("end %s %d %d %s"):format(p.k, p.n, job.attempt, failed and "fail" or "ok"))
    if failed then error("attempt " .. job.attempt .. " of " .. p.n .. " fails") end
  end }]]

-- The events of key k in file seq, in the order written: { ev, n, attempt, how }.
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
-- an end (its runner killed, or a cancel that closed its handler in a
-- wait) is dropped when its number is in gone.
local function check_order(env, k, gone)
  local evs, ended = events(env, k), {}
  for _, e in ipairs(evs) do
    if e.ev == "end" then ended[e.n .. ":" .. e.a] = true end
  end
  local done, open, overlap = {}, nil, false
  for _, e in ipairs(evs) do
    if e.ev == "start" then
      if not (gone and gone[e.n] and not ended[e.n .. ":" .. e.a]) then
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

-- The file seq, for a failed assertion's message.
local function dump(env)
  return "\n" .. (jr.read_file(env.dir .. "/seq") or "")
end

local function ok_count(env, k)
  return #(check_order(env, k))
end

local function seq_list(env, ...)
  local out, err, code = env:cli("sequences", "--json", ...)
  assert.equal(0, code, err)
  local by = {}
  for _, s in ipairs(cjson.decode(out)) do by[s.key] = s end
  return by
end

local function push(env, k, n, ...)
  return env:push("step", cjson.encode({ k = k, n = n }), "--sequence", k, ...)
end

local function pushp(env, k, payload, ...)
  payload.k = k
  return env:push("step", cjson.encode(payload), "--sequence", k, ...)
end

local function open_gate(env, n)
  jr.write_file(env.dir .. "/gate-" .. n, "")
end

for _, backend in ipairs(jr.backends()) do
describe(backend .. " sequences under attack:", function()
  local env = jr.test_env(backend)

  it("puts a push behind the jobs still pending when the sequence's last job was cancelled", function()
    env:script("step", GATED)
    local a = pushp(env, "k", { n = 1, hold = true })
    local b = push(env, "k", 2)
    local c = push(env, "k", 3)
    -- the last job cancelled while a and b are pending
    local _, err, code = env:cli("cancel", tostring(c))
    assert.equal(0, code, err)
    local d = push(env, "k", 4)
    -- one job of the sequence at a time: d waits behind b
    assert.equal("queued", env:job(a).state)
    assert.equal("waiting", env:job(b).state)
    assert.equal("waiting", env:job(d).state)
    assert.equal(3, seq_list(env).k.jobs)
    env:config("concurrency = 4")
    env:start()
    env:wait_state(a, "running", 20)
    open_gate(env, 1)
    jr.wait_for(function() return ok_count(env, "k") == 3 end, 30, "a, b and d ran")
    local done, overlap = check_order(env, "k")
    assert.are.same({ 1, 2, 4 }, done)
    assert.is_false(overlap, dump(env))
    assert.equal(0, env:stop())
  end)

  it("puts a push behind the running head when the only job behind it was cancelled", function()
    env:config("concurrency = 4")
    env:script("step", GATED)
    local a = pushp(env, "h", { n = 1, hold = true })
    local b = push(env, "h", 2)
    env:start()
    env:wait_state(a, "running", 20)
    assert.equal(0, select(3, env:cli("cancel", tostring(b))))
    local c = push(env, "h", 3)
    jr.sleep(1)
    -- c must wait for a; a missing row is c run and deleted beside a
    local row = env:job(c)
    assert.is_not_nil(row, "c ran while a was running")
    assert.equal("waiting", row.state)
    open_gate(env, 1)
    jr.wait_for(function() return ok_count(env, "h") == 2 end, 30, "a and c ran")
    local done, overlap = check_order(env, "h")
    assert.are.same({ 1, 3 }, done)
    assert.is_false(overlap, dump(env))
    assert.equal(0, env:stop())
  end)

  it("runs the next when the running head is cancelled, then the rest in order", function()
    env:config("concurrency = 4")
    env:script("step", GATED)
    local a = pushp(env, "c", { n = 1, hold = true })
    local b = pushp(env, "c", { n = 2, hold = true })
    local c = push(env, "c", 3)
    env:start()
    env:wait_state(a, "running", 20)
    assert.equal("waiting", env:job(b).state)
    assert.equal(0, select(3, env:cli("cancel", tostring(a))))
    env:wait_state(a, "cancelled", 20)
    env:wait_state(b, "running", 20)
    assert.equal("waiting", env:job(c).state)
    -- a push while b runs goes behind c
    local d = push(env, "c", 4)
    assert.equal("waiting", env:job(d).state)
    open_gate(env, 2)
    jr.wait_for(function() return ok_count(env, "c") == 3 end, 30, "b, c, d ran")
    local done, overlap = check_order(env, "c", { [1] = true })
    assert.are.same({ 2, 3, 4 }, done)
    assert.is_false(overlap, dump(env))
    assert.are.same({}, seq_list(env))
    assert.equal(0, env:stop())
  end)

  it("keeps a failing head in place across two runners on one file, and takes back a killed runner's head", function()
    env:config("concurrency = 3, lease = 2")
    env:script("step", GATED)
    local ids = {}
    ids[1] = pushp(env, "m", { n = 1 })               -- runs on the runner to kill
    ids[2] = pushp(env, "m", { n = 2, fail = 2 })     -- fails twice, keeps its place
    for n = 3, 8 do ids[n] = push(env, "m", n) end
    for n = 1, 6 do push(env, "o" .. (n % 3), n) end  -- other sequences beside it
    local doomed = env:start("JR_HOLD=1")
    env:wait_state(ids[1], "running", 20)
    local holder = env:job(ids[1]).locked_by
    env:stop("KILL", doomed)
    -- the other runners start after the kill: the held job is the killed one's
    env:start()
    env:start()
    jr.wait_for(function() return ok_count(env, "m") == 8 end, 60, "m's 8 jobs ran")
    local first = events(env, "m")[1]
    assert.are.same({ ev = "start", n = 1, a = 1, how = "" }, first)
    local done, overlap = check_order(env, "m", { [1] = true })
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8 }, done)
    assert.is_false(overlap, "two jobs of m ran at once")
    -- job 2 ran three times, each after the one before ended
    local twos = 0
    for _, e in ipairs(events(env, "m")) do
      if e.ev == "start" and e.n == 2 then twos = twos + 1 end
    end
    assert.equal(3, twos)
    assert.is_not_nil(holder)
    jr.wait_for(function() return env:count_in("queued", "running", "waiting") == 0 end, 30, "all done")
    assert.are.same({}, seq_list(env))
    env:stop(nil, env.procs[2])
    env:stop(nil, env.procs[3])
  end)

  it("replaces only the last job of a sequence, and cancel_running cancels the running head", function()
    env:config("concurrency = 4")
    env:script("step", GATED)
    local a = pushp(env, "r", { n = 1, hold = true })
    local b = push(env, "r", 2)
    local c = push(env, "r", 3)
    env:start()
    env:wait_state(a, "running", 20)
    local out, err, code = env:cli("push", "step", cjson.encode({ k = "r", n = 4 }),
                                   "--sequence", "r", "--on-conflict", "replace")
    assert.equal(0, code, err)
    assert.truthy(out:find(tostring(c), 1, true) and out:find("replaced", 1, true), out)
    assert.equal(4, cjson.decode(env:job(c).payload).n)
    assert.equal(2, cjson.decode(env:job(b).payload).n)
    out, err, code = env:cli("push", "step", cjson.encode({ k = "r", n = 5 }),
                             "--sequence", "r", "--on-conflict", "cancel_running")
    assert.equal(0, code, err)
    env:wait_state(a, "cancelled", 20)
    jr.wait_for(function() return ok_count(env, "r") == 2 end, 30, "b and the last ran")
    local done, overlap = check_order(env, "r", { [1] = true })
    assert.are.same({ 2, 5 }, done)
    assert.is_false(overlap, dump(env))
    -- a sequence with only a running job: replace goes behind it
    local x = pushp(env, "r2", { n = 1, hold = true })
    env:wait_state(x, "running", 20)
    out, err, code = env:cli("push", "step", cjson.encode({ k = "r2", n = 2 }),
                             "--sequence", "r2", "--on-conflict", "replace")
    assert.equal(0, code, err)
    local y = tonumber(out:match("%d+"))
    assert.are_not.equal(x, y)
    assert.equal("waiting", env:job(y).state)
    open_gate(env, 1)
    jr.wait_for(function() return ok_count(env, "r2") == 2 end, 30, "r2 ran")
    assert.are.same({ 1, 2 }, (check_order(env, "r2")))
    assert.equal(0, env:stop())
  end)

  it("keeps odd keys apart: 256 bytes, control characters, UTF-8, and refuses NUL and 257 bytes", function()
    env:script("step", GATED)
    local long = ("x"):rep(256)
    local keys = { long, long:sub(1, 255) .. "y", "a\tb\1", "ключ☃", "a", " a", "a " }
    local firsts = {}
    for i, k in ipairs(keys) do
      firsts[i] = env:push("step", cjson.encode({ k = "odd", n = i }), "--sequence", k)
      env:push("step", cjson.encode({ k = "odd", n = 100 + i }), "--sequence", k)
    end
    -- each key its own sequence: every first queued, every second waiting
    for i = 1, #keys do
      assert.equal("queued", env:job(firsts[i]).state, keys[i])
      assert.equal("waiting", env:job(firsts[i] + 1).state, keys[i])
    end
    local list = seq_list(env)
    for i, k in ipairs(keys) do
      assert.truthy(list[k], "listed: " .. k)
      assert.equal(firsts[i], list[k].head)
      assert.equal(2, list[k].jobs)
    end
    local _, err, code = env:cli("push", "step", "{}", "--sequence", ("x"):rep(257))
    assert.are_not.equal(0, code)
    assert.truthy(err:find("sequence key of 257 bytes", 1, true), err)
    local q = jr.client(env)
    local id, msg = q:push("step", { k = "odd", n = 0 }, { sequence = "a\0b" })
    assert.is_nil(id)
    assert.truthy(tostring(msg):find("NUL", 1, true), tostring(msg))
    -- nothing pushed into "a" by the refused key
    assert.equal(2, seq_list(env).a.jobs)
    q:close()
    -- skip and unblock name keys exactly
    _, err, code = env:cli("sequences", "skip", "a\tb\1")
    assert.equal(5, code)
    assert.truthy(err:find("is not blocked", 1, true), err)
  end)

  it("runs a new push at once after the sequence's ended jobs are pruned", function()
    env:config('concurrency = 2, retention = { completed = "1s", cancelled = "1s" }')
    env:script("step", GATED)
    local a = push(env, "p", 1)
    local b = push(env, "p", 2)
    local c = push(env, "p", 3)
    assert.equal(0, select(3, env:cli("cancel", tostring(c))))
    env:start()
    jr.wait_for(function() return ok_count(env, "p") == 2 end, 30, "a, b ran")
    jr.wait_for(function() return #env:jobs("sequence_key = 'p'") == 0 end, 30, "pruned")
    local d = pushp(env, "p", { n = 4, hold = true })
    env:wait_state(d, "running", 20)
    local e = push(env, "p", 5)
    assert.equal("waiting", env:job(e).state)
    open_gate(env, 4)
    jr.wait_for(function() return ok_count(env, "p") == 4 end, 30, "d, e ran")
    assert.are.same({ 1, 2, 4, 5 }, (check_order(env, "p")))
    assert.is_false(select(2, check_order(env, "p")))
    assert.equal(0, env:stop())
    local _ = a + b
  end)

  it("on_failure dead ends the jobs behind and a new push runs; a dead last job blocks the next push", function()
    env:config("concurrency = 2")
    env:script("step", GATED)
    local d1 = pushp(env, "dd", { n = 1, fail = 9 }, "--on-failure", "dead")
    local d2 = push(env, "dd", 2, "--on-failure", "dead")
    env:start()
    env:wait_state(d1, "dead", 30)
    env:wait_state(d2, "dead", 10)
    local d3 = push(env, "dd", 3)
    jr.wait_for(function() return ok_count(env, "dd") == 1 end, 30, "d3 ran")
    -- block: the dead job, last of its sequence, holds the next push
    local b1 = pushp(env, "bb", { n = 1, fail = 9 })
    env:wait_state(b1, "dead", 30)
    local b2 = push(env, "bb", 2)
    jr.sleep(1)
    assert.equal("waiting", env:job(b2).state)
    assert.is_true(seq_list(env, "--blocked").bb.blocked)
    assert.equal(0, select(3, env:cli("sequences", "skip", "bb")))
    jr.wait_for(function() return ok_count(env, "bb") == 1 end, 30, "b2 ran")
    assert.equal(0, env:stop())
    local _ = d3
  end)

  it("upgrades a schema-35 database whose sequence lost its last job to a cancel and runs it in order", function()
    if backend ~= "sqlite" then return end   -- PostgreSQL's schema did not change
    jr.make_schema(env, 35)
    local past = jr.past_later(env)
    -- e: 1 queued, 2 waiting, 3 (its last) cancelled while 2 waited
    env:exec(([[
      INSERT INTO jobs (id, name, payload, queue, state, run_at, parents_left,
                        attempts, sequence_key, seq_no, seq_fail, finished_at)
      VALUES (1, 'step', '{"k":"e","n":1}', 'default', 'queued', %s, 0, 0, 'e', 1, 'block', NULL),
             (2, 'step', '{"k":"e","n":2}', 'default', 'waiting', %s, 1, 0, 'e', 2, 'block', NULL),
             (3, 'step', '{"k":"e","n":3}', 'default', 'cancelled', %s, 1, 0, 'e', 3, 'block', %s);
      UPDATE jobs SET flow = 1 WHERE id IN (1, 2, 3);
      INSERT INTO job_deps (parent_id, child_id) VALUES (1, 2), (2, 3);
    ]]):format(past, past, past, past))
    local out, err, code = env:cli("migrate")
    assert.equal(0, code, out .. err)
    local d = push(env, "e", 4)
    assert.equal("waiting", env:job(d).state)
    env:config("concurrency = 4")
    env:script("step", GATED)
    env:start()
    jr.wait_for(function() return ok_count(env, "e") == 3 end, 30, "1, 2, 4 ran")
    local done, overlap = check_order(env, "e")
    assert.are.same({ 1, 2, 4 }, done)
    assert.is_false(overlap, dump(env))
    assert.equal(0, env:stop())
  end)
  it("does not run a skipped dead job, retried by hand, beside the sequence's running job", function()
    env:config("concurrency = 4")
    env:script("step", GATED)
    local a = pushp(env, "sr", { n = 1, fail = 9 }, "--on-failure", "skip")
    local b = pushp(env, "sr", { n = 2, hold = true })
    env:start()
    env:wait_state(a, "dead", 30)
    env:wait_state(b, "running", 20)
    -- a no longer holds the sequence; retried, it goes behind b
    local out, err, code = env:cli("dead", "retry", tostring(a))
    assert.equal(0, code, out .. err)
    assert.equal("waiting", env:job(a).state)
    -- a push now goes behind a, the sequence's last
    local c = push(env, "sr", 3)
    assert.equal("waiting", env:job(c).state)
    jr.sleep(1.5)
    open_gate(env, 2)
    jr.wait_for(function() return env:count_in("queued", "running", "waiting") == 0 end,
                30, "all ended")
    local done, overlap = check_order(env, "sr")
    assert.is_false(overlap, "a retried ran beside b" .. dump(env))
    -- a fails on (its fail is 9) and ends dead again, skipped: c runs after it
    assert.are.same({ 2, 3 }, done, dump(env))
    local evs, last_a, first_c = events(env, "sr"), 0, nil
    for i, e in ipairs(evs) do
      if e.n == 1 then last_a = i end
      if e.n == 3 and not first_c then first_c = i end
    end
    assert.is_true(first_c > last_a, "c ran before a's retry" .. dump(env))
    assert.equal("dead", env:job(a).state)
    assert.equal(0, env:stop())
  end)

  it("queues at once a skipped dead job retried by hand when its sequence is empty", function()
    env:script("step", GATED)
    local a = pushp(env, "se", { n = 1, fail = 9 }, "--on-failure", "skip")
    env:start()
    env:wait_state(a, "dead", 30)
    assert.equal(0, env:stop())
    open_gate(env, 1)
    jr.write_file(env.dir .. "/heal-1", "")
    local out, err, code = env:cli("dead", "retry", tostring(a))
    assert.equal(0, code, out .. err)
    assert.equal("queued", env:job(a).state)
    -- it holds the sequence again: a push waits for it
    local c = push(env, "se", 2)
    assert.equal("waiting", env:job(c).state)
    local s = seq_list(env).se
    assert.truthy(s, "se listed")
    assert.equal(a, s.head)
    assert.equal(2, s.jobs)
    env:start()
    jr.wait_for(function() return ok_count(env, "se") == 2 end, 30, "a and c ran")
    local done, overlap = check_order(env, "se")
    assert.are.same({ 1, 2 }, done)
    assert.is_false(overlap, dump(env))
    assert.equal(0, env:stop())
  end)

  it("puts the skipped dead jobs of a retry of all at the sequence's end, in their order", function()
    env:config("concurrency = 4")
    env:script("step", GATED)
    local a1 = pushp(env, "sa", { n = 1, fail = 9 }, "--on-failure", "skip")
    local a2 = pushp(env, "sa", { n = 2, fail = 9 }, "--on-failure", "skip")
    local b = pushp(env, "sa", { n = 3, hold = true })
    env:start()
    env:wait_state(a1, "dead", 30)
    env:wait_state(a2, "dead", 30)
    env:wait_state(b, "running", 20)
    jr.write_file(env.dir .. "/heal-1", "")
    jr.write_file(env.dir .. "/heal-2", "")
    local out, err, code = env:cli("dead", "retry", "--all")
    assert.equal(0, code, out .. err)
    assert.equal("waiting", env:job(a1).state)
    assert.equal("waiting", env:job(a2).state)
    assert.equal(3, seq_list(env).sa.jobs)
    jr.sleep(1)
    open_gate(env, 3)
    jr.wait_for(function() return ok_count(env, "sa") == 3 end, 30, "all ran")
    local done, overlap = check_order(env, "sa")
    assert.are.same({ 3, 1, 2 }, done, dump(env))
    assert.is_false(overlap, dump(env))
    assert.equal(0, env:stop())
  end)

  it("queues the first of a retry of all the skipped dead jobs of an otherwise empty sequence, the others behind it", function()
    env:script("step", GATED)
    local a1 = pushp(env, "sz", { n = 1, fail = 9 }, "--on-failure", "skip")
    local a2 = pushp(env, "sz", { n = 2, fail = 9 }, "--on-failure", "skip")
    local a3 = pushp(env, "sz", { n = 3, fail = 9 }, "--on-failure", "skip")
    env:start()
    env:wait_state(a3, "dead", 30)
    assert.equal(0, env:stop())
    assert.equal("dead", env:job(a1).state)
    assert.equal("dead", env:job(a2).state)
    for n = 1, 3 do jr.write_file(env.dir .. "/heal-" .. n, "") end
    local out, err, code = env:cli("dead", "retry", "--all")
    assert.equal(0, code, out .. err)
    assert.equal("queued", env:job(a1).state)
    assert.equal("waiting", env:job(a2).state)
    assert.equal("waiting", env:job(a3).state)
    env:start()
    jr.wait_for(function() return ok_count(env, "sz") == 3 end, 30, "all ran")
    local done, overlap = check_order(env, "sz")
    -- the first three ends are the failures; then 1, 2, 3 again, in order
    assert.are.same({ 1, 2, 3 }, done, dump(env))
    assert.is_false(overlap, dump(env))
    assert.equal(0, env:stop())
  end)

  it("puts a rerun of a skipped dead job at the sequence's end, behind its running job", function()
    env:config("concurrency = 4")
    env:script("step", GATED)
    local a = pushp(env, "sn", { n = 1, fail = 9 }, "--on-failure", "skip")
    local b = pushp(env, "sn", { n = 2, hold = true })
    env:start()
    env:wait_state(a, "dead", 30)
    env:wait_state(b, "running", 20)
    jr.write_file(env.dir .. "/heal-1", "")
    local out, err, code = env:cli("rerun", tostring(a))
    assert.equal(0, code, out .. err)
    assert.equal("waiting", env:job(a).state)
    jr.sleep(1)
    open_gate(env, 2)
    jr.wait_for(function() return ok_count(env, "sn") == 2 end, 30, "b and a ran")
    local done, overlap = check_order(env, "sn")
    assert.are.same({ 2, 1 }, done, dump(env))
    assert.is_false(overlap, dump(env))
    assert.equal(0, env:stop())
  end)

  it("keeps the place of a blocking dead job retried by hand, at the head", function()
    env:config("concurrency = 4")
    env:script("step", GATED)
    local a = pushp(env, "sh", { n = 1, fail = 9 })
    local b = push(env, "sh", 2)
    env:start()
    env:wait_state(a, "dead", 30)
    assert.equal(0, env:stop())
    assert.equal("waiting", env:job(b).state)
    jr.write_file(env.dir .. "/heal-1", "")
    local out, err, code = env:cli("dead", "retry", tostring(a))
    assert.equal(0, code, out .. err)
    assert.equal("queued", env:job(a).state)
    assert.equal("waiting", env:job(b).state)
    local s = seq_list(env).sh
    assert.equal(a, s.head)
    assert.equal(2, s.jobs)
    local c = push(env, "sh", 3)
    assert.equal("waiting", env:job(c).state)
    env:start()
    jr.wait_for(function() return ok_count(env, "sh") == 3 end, 30, "all ran")
    local done, overlap = check_order(env, "sh")
    assert.are.same({ 1, 2, 3 }, done)
    assert.is_false(overlap, dump(env))
    assert.equal(0, env:stop())
  end)

  it("lists a sequence whose blocking dead job was purged, as waiting", function()
    env:config("concurrency = 2")
    env:script("step", GATED)
    local a = pushp(env, "pg", { n = 1, fail = 9 })
    local b = push(env, "pg", 2)
    local c = push(env, "pg", 3)
    env:start()
    env:wait_state(a, "dead", 30)
    assert.equal(0, env:stop())
    local out, err, code = env:cli("dead", "purge")
    assert.equal(0, code, out .. err)
    assert.is_nil(env:job(a))
    assert.equal("waiting", env:job(b).state)
    -- "leaves its sequence waiting": still listed, with its jobs
    local s = seq_list(env).pg
    assert.truthy(s, "pg listed")
    assert.equal(2, s.jobs)
    -- a new push goes behind c
    local d = push(env, "pg", 4)
    assert.equal("waiting", env:job(d).state)
    local _ = c
  end)
  it("puts a push behind the pending jobs after the last two jobs were cancelled, and replace takes the pending one", function()
    env:script("step", GATED)
    local a = push(env, "t", 1)
    local b = push(env, "t", 2)
    local c = push(env, "t", 3)
    local d = push(env, "t", 4)
    assert.equal(0, select(3, env:cli("cancel", tostring(d), tostring(c))))
    local e = push(env, "t", 5)
    assert.equal("waiting", env:job(e).state)
    assert.equal(3, seq_list(env).t.jobs)
    assert.equal(a, seq_list(env).t.head)
    -- replace takes the pending last job, not a cancelled one
    local out, err, code = env:cli("push", "step", cjson.encode({ k = "t", n = 6 }),
                                   "--sequence", "t", "--on-conflict", "replace")
    assert.equal(0, code, err)
    assert.truthy(out:find(tostring(e), 1, true), out)
    assert.equal(6, cjson.decode(env:job(e).payload).n)
    -- a new push still goes behind e
    local f = push(env, "t", 7)
    assert.equal(0, select(3, env:cli("cancel", tostring(f))))
    local g = push(env, "t", 8)
    assert.equal("waiting", env:job(g).state)
    env:config("concurrency = 4")
    env:start()
    jr.wait_for(function() return ok_count(env, "t") == 4 end, 30, "1, 2, 6, 8 ran")
    local done, overlap = check_order(env, "t")
    assert.are.same({ 1, 2, 6, 8 }, done)
    assert.is_false(overlap, dump(env))
    assert.equal(0, env:stop())
    local _ = b
  end)

  it("puts a push behind the pending jobs when the cancelled last job was pruned", function()
    env:config('concurrency = 4, retention = { cancelled = "1s" }')
    env:script("step", GATED)
    local a = pushp(env, "q", { n = 1, hold = true })
    local b = push(env, "q", 2)
    local c = push(env, "q", 3)
    env:start()
    env:wait_state(a, "running", 20)
    assert.equal(0, select(3, env:cli("cancel", tostring(c))))
    jr.wait_for(function() return env:job(c) == nil end, 30, "c pruned")
    local d = push(env, "q", 4)
    local row = env:job(d)
    assert.is_not_nil(row, "d ran while a was running")
    assert.equal("waiting", row.state)
    open_gate(env, 1)
    jr.wait_for(function() return ok_count(env, "q") == 3 end, 30, "a, b, d ran")
    local done, overlap = check_order(env, "q")
    assert.are.same({ 1, 2, 4 }, done)
    assert.is_false(overlap, dump(env))
    assert.equal(0, env:stop())
    local _ = b
  end)
  it("keeps a push behind a blocked head when the last job was cancelled, until skip", function()
    env:config("concurrency = 2")
    env:script("step", GATED)
    local a = pushp(env, "bl", { n = 1, fail = 9 })
    local b = push(env, "bl", 2)
    local c = push(env, "bl", 3)
    env:start()
    env:wait_state(a, "dead", 30)
    assert.equal(0, select(3, env:cli("cancel", tostring(c))))
    local d = push(env, "bl", 4)
    jr.sleep(1)
    assert.equal("waiting", env:job(b).state)
    assert.equal("waiting", env:job(d).state)
    local s = seq_list(env, "--blocked").bl
    assert.truthy(s, "bl listed blocked")
    assert.equal(a, s.head)
    assert.equal(0, select(3, env:cli("sequences", "skip", "bl")))
    jr.wait_for(function() return ok_count(env, "bl") == 2 end, 30, "b and d ran")
    local done, overlap = check_order(env, "bl")
    assert.are.same({ 2, 4 }, done)
    assert.is_false(overlap, dump(env))
    assert.equal(0, env:stop())
  end)
end)
end
