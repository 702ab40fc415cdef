-- fair_stamp_spec.lua - PostgreSQL: a batch pushed into a fair queue is
-- tagged in its own insert (the SQL function fair_stamp, migration 36),
-- each row written once, with the keys, tags and weights the insert
-- trigger gives a job pushed alone (docs/queues.md, "Fair share"); a
-- database of schema 35 with fair jobs is brought forward intact and its
-- jobs and the new pushes run. SQLite tags in its push statements already.
local jr = require "jr"

local WORKER = jr.RECORD .. [[
  return function(job) record("done", job.payload.t .. job.payload.n) end]]

local FAIR = [[concurrency = 1,
  limits = { ["queue:fq"] = { fair = { key = "payload.t", weights = { a = 2 } } } }]]

-- Each job of queue fq: n, key, tag, weight and its row's slot in its
-- page (a second version of the row, written by an UPDATE, would be in
-- a slot after every row the insert wrote).
local function rows(env)
  return env:query("SELECT (payload ->> 'n')::int AS n, fair_key AS k,"
    .. " fair_tag AS tag, fair_w AS w, (ctid::text::point)[1]::int AS slot"
    .. " FROM jobs WHERE queue = 'fq' ORDER BY id")
end

local function push_batch(env, list)
  local q = jr.client(env)
  local jobs = {}
  for i, j in ipairs(list) do
    jobs[i] = { "fs.w", { t = j[1], n = j[2] }, { queue = "fq" } }
  end
  assert(q:push_many(jobs))
  q:close()
end

local function run_all(env, n)
  env:script("fs.w", WORKER)
  env:start()
  jr.wait_for(function() return #jr.lines(env.dir .. "/done") == n end,
              60, n .. " jobs done")
  assert.equal(0, env:stop())
end

for _, backend in ipairs(jr.backends()) do
  if backend == "postgres" then
  describe(backend .. ": a batch into a fair queue tagged in its insert", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("writes each row once, with the tags a job pushed alone gets", function()
      env:config(FAIR)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      push_batch(env, { { "a", 1 }, { "a", 2 }, { "b", 3 }, { "a", 4 } })
      -- a (weight 2): its finish 3/2, its jobs 1/2 apart up to it; b's 1
      assert.are.same({
        { n = 1, k = "a", tag = 0, w = 2, slot = 1 },
        { n = 2, k = "a", tag = 0.5, w = 2, slot = 2 },
        { n = 3, k = "b", tag = 0, w = 1, slot = 3 },
        { n = 4, k = "a", tag = 1, w = 2, slot = 4 },
      }, rows(env))
      -- one job alone (the trigger's tags): b's finish moves to 2
      local id = env:push("fs.w", '{"t": "b", "n": 5}', "--queue", "fq")
      assert.is_truthy(id)
      -- a batch again: a's finish 3/2 moves to 2
      push_batch(env, { { "a", 6 }, { "c", 7 } })
      local r = rows(env)
      assert.are.same({ n = 5, k = "b", tag = 1, w = 1 },
                      { n = r[5].n, k = r[5].k, tag = r[5].tag, w = r[5].w })
      assert.are.same({ n = 6, k = "a", tag = 1.5, w = 2, slot = r[6].slot },
                      r[6])
      assert.are.same({ n = 7, k = "c", tag = 0, w = 1, slot = r[7].slot },
                      r[7])
      -- the batch's rows follow the rows before (none rewritten)
      assert.is_true(r[6].slot > r[5].slot and r[7].slot == r[6].slot + 1,
                     "slots " .. r[5].slot .. ", " .. r[6].slot .. ", " .. r[7].slot)
      run_all(env, 7)
      -- in tag order: a1 b3 c7 (0), a2 (0.5), a4 b5 (1), a6 (1.5). Jobs
      -- of equal tags are claimed in id order, but the local queue deals
      -- the jobs claimed ahead round robin between keys, and how many one
      -- claim takes depends on when the worker is ready: a4 and b5 may
      -- come either way
      local tag = { a1 = 0, b3 = 0, c7 = 0, a2 = 0.5, a4 = 1, b5 = 1, a6 = 1.5 }
      local done = jr.lines(env.dir .. "/done")
      local all = table.concat(done, " ")
      assert.equal(7, #done, all)
      local seen = {}
      for i, j in ipairs(done) do
        assert.is_not_nil(tag[j], all)
        assert.is_nil(seen[j], all)
        seen[j] = true
        if i > 1 then assert.is_true(tag[done[i - 1]] <= tag[j], all) end
      end
    end)

    it("tags a batch of a queue made fair by a name's weights, and of a plain queue none", function()
      env:config("concurrency = 1")
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      env:exec([[INSERT INTO fair_names (name, path, weights, dflt)
                 VALUES ('fs.w', '{t}', '{"a": 4}', 1)]])
      push_batch(env, { { "a", 1 }, { "b", 2 } })
      local r = rows(env)
      assert.are.same({ "fs.w\31a", "fs.w\31b" }, { r[1].k, r[2].k })
      assert.are.same({ 4, 1 }, { r[1].w, r[2].w })
      assert.are.same({ 0, 0 }, { r[1].tag, r[2].tag })
      -- (migration 38's fair_stamp, of five arrays, beside it)
      assert.are.same({ { n = 1 } }, env:query(
        "SELECT count(*)::int AS n FROM fair_paths WHERE queue = 'fq'"))
      env:exec("DELETE FROM fair_names")
      env:exec("DELETE FROM fair_paths")
      local q = jr.client(env)
      assert(q:push_many({ { "fs.w", { t = "a", n = 3 }, { queue = "pq" } } }))
      q:close()
      assert.are.same({ { none = true } }, env:query("SELECT fair_key IS NULL"
        .. " AND fair_tag IS NULL AS none FROM jobs WHERE queue = 'pq'"))
    end)
  end)

  describe(backend .. ": migration 36 (fair tags in a batch's insert)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-35 database with its fair jobs intact; they and a batch pushed after run", function()
      jr.make_schema(env, 35)
      local past, later = jr.past_later(env)
      env:exec(([[
        INSERT INTO fair_paths (queue, path) VALUES ('fq', '{t}');
        INSERT INTO fair_keys (queue, key, pass) VALUES ('fq', 'a', 3);
        INSERT INTO fair_clocks (queue, clock) VALUES ('fq', 2);
        INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                          locked_by, locked_until, last_error, died_at,
                          finished_at, fair_key, fair_tag, fair_w)
        VALUES ('fs.w', '{"t": "a", "n": 1}', 'fq', 'queued', %s, 0, NULL, NULL, NULL, NULL, NULL, 'a', 2.5, 1),
               ('fs.w', '{"t": "a", "n": 2}', 'fq', 'running', %s, 1, 'old-runner', %s, NULL, NULL, NULL, 'a', NULL, NULL),
               ('fs.w', '{"t": "b", "n": 3}', 'fq', 'dead', %s, 4, NULL, NULL, 'boom', %s, %s, 'b', NULL, NULL),
               ('fs.w', '{"t": "b", "n": 4}', 'fq', 'completed', %s, 1, NULL, NULL, NULL, NULL, %s, 'b', NULL, NULL)
      ]]):format(past, past, later, past, past, past, past, past))
      local before = jr.job_snapshot(env)
      env:config(FAIR)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      -- (migration 38's fair_stamp, of five arrays, beside it)
      assert.are.same({ { n = 1 } }, env:query(
        "SELECT count(*)::int AS n FROM pg_proc p JOIN pg_namespace s"
        .. " ON s.oid = p.pronamespace WHERE p.proname = 'fair_stamp'"
        .. " AND p.pronargs = 3 AND s.nspname = current_schema()"))
      push_batch(env, { { "b", 5 }, { "a", 6 } })
      for _, r in ipairs(rows(env)) do
        if r.n >= 5 then
          assert.is_truthy(r.tag, "job " .. r.n .. " tagged")
          assert.is_true(r.tag >= 2, "job " .. r.n .. " tagged from the clock: " .. r.tag)
        end
      end
      run_all(env, 3)
      local done = jr.lines(env.dir .. "/done")
      table.sort(done)
      assert.are.same({ "a1", "a6", "b5" }, done)
    end)
  end)
  end
end
