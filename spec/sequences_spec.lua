-- sequences_spec.lua - sequences (docs/queues.md, "Sequences"), on each
-- backend: the jobs of one sequence key run one at a time and in push
-- order, a failing job keeping its place through its retries and
-- backoff, with several workers free; each on_failure (block holds the
-- rest until skip or unblock, skip runs the next, dead ends the rest);
-- `jobrunner sequences [--blocked]` and GET /api/sequences with its skip
-- and unblock; pushes from the CLI, the Lua module,
-- a handler and SQL; bad input refused naming the job.
local jr = require "jr"
local cjson = require "cjson"
local H = require "jrhttp"

-- A handler that records "KEY N start end" per attempt in file seq, and
-- fails the attempts its payload asks to (fail = number of attempts).
local WORKER = jr.RECORD .. [[
  local jobrunner = require "jobrunner"
  local now = jobrunner.now
  return { max_retries = 3, backoff = 0.3, handle = function(job)
    local p = job.payload
    local t0 = now()
    local deadline = t0 + (p.ms or 20) / 1000
    jobrunner.sleep(math.max(0, deadline - now()))
    -- p.gate: runs on once that file exists (a head held while the spec
    -- acts, however slow the machine)
    while p.gate and not io.open(p.gate) do os.execute("sleep 0.02") end
    local failed = p.fail and job.attempt <= p.fail
    record("seq", ("%s %d %.6f %.6f %d %s"):format(p.k, p.n, t0, now(),
           job.attempt, failed and "fail" or "ok"))
    if failed then error("attempt " .. job.attempt .. " of " .. p.n .. " fails") end
  end }]]

-- The records of key k in file lines: their numbers in start order and
-- whether two overlapped.
local function order_of(lines, k)
  local rows = {}
  for _, l in ipairs(lines) do
    local key, n, s, e, _, how = l:match("^(%S+) (%d+) (%S+) (%S+) (%d+) (%S+)$")
    if key == k then
      rows[#rows + 1] = { n = tonumber(n), s = tonumber(s), e = tonumber(e), ok = how == "ok" }
    end
  end
  table.sort(rows, function(a, b) return a.s < b.s end)
  local done, overlap = {}, false
  for i, r in ipairs(rows) do
    if r.ok then done[#done + 1] = r.n end
    if i > 1 and r.s < rows[i - 1].e then overlap = true end
  end
  return done, overlap, rows
end

local function seq_list(env, ...)
  local out, err, code = env:cli("sequences", "--json", ...)
  assert.equal(0, code, err)
  local by = {}
  for _, s in ipairs(cjson.decode(out)) do by[s.key] = s end
  return by
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " sequences:", function()
    local env = jr.test_env(backend)

    it("runs each sequence's jobs one at a time in push order through retries", function()
      env:config("concurrency = 6")
      env:script("step", WORKER)
      local keys = { "a", "b", "c" }
      local ids = {}
      for n = 1, 8 do
        for _, k in ipairs(keys) do
          -- b's third job fails twice: it keeps its place through its backoff
          local fail = (k == "b" and n == 3) and 2 or nil
          ids[#ids + 1] = env:push("step", cjson.encode({ k = k, n = n, fail = fail }),
                                   "--sequence", "cust-" .. k)
        end
      end
      -- the jobs behind a sequence's head wait, never claimed
      assert.equal("queued", env:job(ids[1]).state)
      assert.equal("waiting", env:job(ids[4]).state)
      local seqs = seq_list(env)
      assert.equal(8, seqs["cust-a"].jobs)
      assert.equal(ids[1], seqs["cust-a"].head)
      assert.is_false(seqs["cust-a"].blocked)
      env:start()
      jr.wait_for(function()
        local ok = 0
        for _, l in ipairs(jr.lines(env.dir .. "/seq")) do
          if l:find(" ok$") then ok = ok + 1 end
        end
        return ok == 24
      end, 60, "24 jobs done")
      assert.equal(0, env:stop())
      local lines = jr.lines(env.dir .. "/seq")
      for _, k in ipairs(keys) do
        local done, overlap, rows = order_of(lines, k)
        assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8 }, done)
        assert.is_false(overlap, k .. " overlapped")
        if k == "b" then assert.equal(10, #rows) end   -- two failed attempts
      end
      -- the three sequences ran beside each other, not one after another
      assert.is_true(jr.max_overlap((function()
        local t = {}
        for _, l in ipairs(lines) do
          local k, _, s, e = l:match("^(%S+) (%d+) (%S+) (%S+)")
          t[#t + 1] = ("x %s %s"):format(s, e)
        end
        return t
      end)()) >= 2)
      assert.are.same({}, seq_list(env))
    end)

    it("blocks a sequence behind a dead job until skip or unblock", function()
      env:config("concurrency = 4")
      env:script("step", WORKER)
      local function push(n, fail, ...)
        return env:push("step", cjson.encode({ k = "s", n = n, fail = fail }),
                        "--sequence", "blk", ...)
      end
      local first = push(1, 9)      -- dies: 4 attempts, all fail
      local second = push(2)
      env:start()
      env:wait_state(first, "dead", 30)
      -- held: the next stays waiting, and a new push waits too
      local third = push(3)
      jr.sleep(1)
      assert.equal("waiting", env:job(second).state)
      assert.equal("waiting", env:job(third).state)
      local blocked = seq_list(env, "--blocked")
      assert.truthy(blocked.blk, "blk is listed blocked")
      assert.equal(first, blocked.blk.head)
      assert.equal("dead", blocked.blk.state)
      assert.is_true(blocked.blk.blocked)
      local out = env:cli("sequences")
      assert.truthy(out:find("blk", 1, true) and out:find("blocked", 1, true), out)
      out = env:cli("stats")
      assert.truthy(out:find("sequences 1 (blocked 1", 1, true), out)
      out = env:cli("stats", "--json")
      assert.are.same({ held = 1, blocked = 1 }, cjson.decode(out).sequences)
      -- unblock: the dead job runs again in its place (and dies again)
      local _, err, code = env:cli("sequences", "unblock", "blk")
      assert.equal(0, code, err)
      jr.wait_for(function()
        local n = 0
        for _, l in ipairs(jr.lines(env.dir .. "/seq")) do
          if l:match("^s 1 ") then n = n + 1 end
        end
        return n == 8
      end, 30, "the dead job's second run")
      env:wait_state(first, "dead", 30)
      jr.sleep(0.5)
      assert.equal("waiting", env:job(second).state)
      -- skip: the next runs, then the one after
      _, err, code = env:cli("sequences", "skip", "blk")
      assert.equal(0, code, err)
      jr.wait_for(function()
        local done = order_of(jr.lines(env.dir .. "/seq"), "s")
        return #done == 2
      end, 30, "the rest ran")
      local done, overlap = order_of(jr.lines(env.dir .. "/seq"), "s")
      assert.are.same({ 2, 3 }, done)
      assert.is_false(overlap)
      -- not blocked any more
      out, err, code = env:cli("sequences", "skip", "blk")
      assert.equal(5, code, out)
      assert.truthy(err:find("sequence 'blk' is not blocked", 1, true), err)
      assert.equal(0, env:stop())
    end)

    it("runs the next after a dead job with on_failure skip, ends the rest with dead", function()
      env:config("concurrency = 4")
      env:script("step", WORKER)
      local function push(k, n, fail, how)
        return env:push("step", cjson.encode({ k = k, n = n, fail = fail }),
                        "--sequence", k, "--on-failure", how)
      end
      local s1 = push("sk", 1, 9, "skip")
      push("sk", 2, nil, "skip")
      push("sk", 3, nil, "skip")
      local d1 = push("dd", 1, 9, "dead")
      local d2 = push("dd", 2, nil, "dead")
      local d3 = push("dd", 3, nil, "dead")
      env:start()
      jr.wait_for(function()
        return #(order_of(jr.lines(env.dir .. "/seq"), "sk")) == 2
      end, 30, "skip's rest ran")
      env:wait_state(s1, "dead", 10)
      local done, overlap = order_of(jr.lines(env.dir .. "/seq"), "sk")
      assert.are.same({ 2, 3 }, done)
      assert.is_false(overlap)
      env:wait_state(d1, "dead", 30)
      local r2 = env:wait_state(d2, "dead", 10)
      env:wait_state(d3, "dead", 10)
      assert.equal("parent " .. d1 .. " ended dead", r2.last_error)
      assert.are.same({}, (order_of(jr.lines(env.dir .. "/seq"), "dd")))
      -- a sequence that ended runs a new push at once
      local d4 = push("dd", 4, nil, "dead")
      jr.wait_for(function()
        return #(order_of(jr.lines(env.dir .. "/seq"), "dd")) == 1
      end, 30, "a new push ran")
      -- (the handler records before the runner commits its end)
      jr.wait_for(function() return env:job(d4) == nil end, 20, "done and gone")
      assert.are.same({}, seq_list(env, "--blocked"))
      assert.equal(0, env:stop())
    end)

    it("takes sequences from the Lua module, a handler and SQL in push order", function()
      env:config("concurrency = 4")
      env:script("step", WORKER)
      env:script("fan", [[
        local jobrunner = require "jobrunner"
        return function(job)
          for n = 3, 4 do
            jobrunner.push("step", { k = "m", n = n }, { sequence = "mix" })
          end
        end]])
      local q = jr.client(env)
      assert(q:push("step", { k = "m", n = 1, ms = 300 }, { sequence = "mix" }))
      assert(q:push("fan", {}))
      local nilv, msg = q:push("step", {}, { sequence = "" })
      assert.is_nil(nilv)
      assert.truthy(msg:find("job 'step': sequence key of 0 bytes", 1, true), msg)
      nilv, msg = q:push("step", {}, { on_failure = "skip" })
      assert.is_nil(nilv)
      assert.truthy(msg:find("job 'step': on_failure goes with a sequence", 1, true), msg)
      local ok, e = pcall(q.push, q, "step", {}, { sequence = "x", on_failure = "later" })
      assert.is_false(ok)
      assert.truthy(tostring(e):find([[option 'on_failure' must be "block", "skip" or "dead", got later]],
        1, true), tostring(e))
      local _, err, code = env:cli("push", "step", "--sequence", "x", "--unique-key", "u")
      assert.are_not.equal(0, code)
      assert.truthy(err:find("job 'step': a job in a sequence cannot have after nor a unique_key",
        1, true), err)
      _, err, code = env:cli("push", "step", "--on-failure", "later", "--sequence", "x")
      assert.are_not.equal(0, code)
      assert.truthy(err:find("invalid --on-failure 'later'", 1, true), err)
      env:start()
      jr.wait_for(function()
        return #(order_of(jr.lines(env.dir .. "/seq"), "m")) == 3
      end, 30, "the handler's pushes ran")
      if backend == "postgres" then
        env:exec(("SELECT %s.sequence(%s.push('step', '{\"k\":\"m\",\"n\":5}'), 'mix')")
          :format(env.schema, env.schema))
        jr.wait_for(function()
          return #(order_of(jr.lines(env.dir .. "/seq"), "m")) == 4
        end, 30, "the SQL push ran")
      end
      local done, overlap = order_of(jr.lines(env.dir .. "/seq"), "m")
      assert.are.same(backend == "postgres" and { 1, 3, 4, 5 } or { 1, 3, 4 }, done)
      assert.is_false(overlap)
      q:close()
      assert.equal(0, env:stop())
    end)
    it("lists, skips and unblocks over HTTP, and takes a sequence in POST /api/jobs", function()
      env:script("step", WORKER)
      local base = H.start(env, "concurrency = 2")
      local function post(path, body)
        return H.req(base .. path, { method = "POST", token = true, body = body })
      end
      local st, body = post("/api/jobs", cjson.encode({ name = "step",
        payload = { k = "h", n = 1, fail = 9 }, sequence = "web", on_failure = "block" }))
      assert.equal(201, st, body)
      local first = cjson.decode(body).id
      st, body = post("/api/jobs", cjson.encode({ name = "step",
        payload = { k = "h", n = 2 }, sequence = "web" }))
      assert.equal(201, st, body)
      local second = cjson.decode(body).id
      st, body = post("/api/jobs", cjson.encode({ name = "step", sequence = "web",
                                                  on_failure = "later" }))
      assert.equal(400, st, body)
      assert.truthy(body:find('on_failure', 1, true), body)
      st, body = post("/api/jobs", cjson.encode({ name = "step", on_failure = "skip" }))
      assert.equal(400, st, body)
      assert.truthy(body:find("job 'step': on_failure goes with a sequence", 1, true), body)
      env:wait_state(first, "dead", 30)
      st, body = H.req(base .. "/api/sequences?blocked=1", { token = true })
      assert.equal(200, st, body)
      local list = cjson.decode(body)
      assert.equal(1, #list)
      assert.are.same({ key = "web", head = first, state = "dead", jobs = 1, blocked = true }, list[1])
      st, body = H.req(base .. "/metrics", { token = true })
      assert.equal(200, st, body)
      assert.truthy(body:find("\njobrunner_sequences 1\n", 1, true), body)
      assert.truthy(body:find("\njobrunner_sequences_blocked 1\n", 1, true), body)
      st, body = H.req(base .. "/api/stats", { token = true })
      assert.equal(200, st, body)
      assert.are.same({ held = 1, blocked = 1 }, cjson.decode(body).sequences)
      st, body = post("/api/sequences/skip", "")
      assert.equal(400, st, body)
      assert.truthy(body:find("give the sequence's key", 1, true), body)
      st, body = post("/api/sequences/unblock?key=nope", "")
      assert.equal(404, st, body)
      assert.equal("waiting", env:job(second).state)
      st, body = post("/api/sequences/skip?key=web", "")
      assert.equal(200, st, body)
      assert.are.same({ key = "web", skipped = 1 }, cjson.decode(body))
      jr.wait_for(function()
        return #(order_of(jr.lines(env.dir .. "/seq"), "h")) == 1
      end, 30, "the job after the skipped one ran")
      st, body = H.req(base .. "/api/sequences", { token = true })
      assert.equal(200, st, body)
      assert.are.same({}, cjson.decode(body))
      assert.equal(0, env:stop())
    end)
    it("lets no job past a running one when a job in the middle is cancelled", function()
      env:config("concurrency = 4")
      env:script("step", WORKER)
      local gate = env.dir .. "/gate_mid"
      local function push(n, ms, g)
        return env:push("step", cjson.encode({ k = "c", n = n, ms = ms, gate = g }),
                        "--sequence", "mid")
      end
      local a = push(1, 10, gate)
      local b = push(2)
      local c = push(3)
      env:start()
      env:wait_state(a, "running", 20)
      local out, err, code = env:cli("cancel", tostring(b))
      assert.equal(0, code, out .. err)
      assert.equal("cancelled", env:job(b).state)
      assert.equal("waiting", env:job(c).state)
      jr.write_file(gate, "")
      jr.wait_for(function()
        return #(order_of(jr.lines(env.dir .. "/seq"), "c")) == 2
      end, 30, "a and c ran")
      local done, overlap = order_of(jr.lines(env.dir .. "/seq"), "c")
      assert.are.same({ 1, 3 }, done)
      assert.is_false(overlap)
      assert.equal(0, env:stop())
    end)
    it("orders two producers pushing into one sequence at once, one job at a time", function()
      env:config("concurrency = 4")
      env:script("step", WORKER)
      env:start()
      local loops = {}
      for p = 1, 2 do
        loops[p] = ("for i in $(seq 1 25); do %s -c %s push step " ..
          "\"{\\\"k\\\":\\\"r\\\",\\\"n\\\":$((%d000 + i)),\\\"ms\\\":5}\" " ..
          "--sequence race >/dev/null || exit 1; done"):format(jr.quote(jr.bin),
          jr.quote(env.config_file), p)
      end
      local _, err, code = jr.sh("(" .. loops[1] .. ") & a=$!; (" .. loops[2] .. ") & b=$!; " ..
                                  "wait $a && wait $b")
      assert.equal(0, code, err)
      jr.wait_for(function()
        return #(order_of(jr.lines(env.dir .. "/seq"), "r")) == 50
      end, 60, "50 jobs ran")
      local done, overlap = order_of(jr.lines(env.dir .. "/seq"), "r")
      assert.is_false(overlap)
      local last = { 0, 0 }
      for _, n in ipairs(done) do
        local p = n // 1000
        assert.is_true(n > last[p], ("producer %d's %d after %d"):format(p, n, last[p]))
        last[p] = n
      end
      assert.equal(0, env:stop())
    end)
  end)
end
