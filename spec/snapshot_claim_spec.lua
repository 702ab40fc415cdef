-- snapshot_claim_spec.lua - PostgreSQL: a drain while another session
-- holds a snapshot open (an idle transaction, a long report). Vacuum cannot
-- remove the entries a claimed or deleted job leaves in the indexes then,
-- nor can a scan mark them dead, so a statement that walks an index from
-- its start steps over every job claimed since the snapshot, each entry a
-- heap fetch: the claim walked jobs_claim from its front at every batch,
-- and the success's DELETE found its ids through jobs_lease, read whole.
-- The claim starts from where its last batch ended and the DELETE finds
-- its ids by the primary key (docs/storage.md, "A held snapshot"), so
-- the entries the drain reads grow with the jobs, not with their square:
-- counted here by the server's statistics, which load does not change.
local jr = require "jr"

if not jr.pg_url or (os.getenv("JR_BACKENDS") or "postgres"):find("postgres") == nil then
  return
end

describe("postgres: a drain under a held snapshot", function()
  local env = jr.test_env("postgres")
  local N = 20000

  local psql = jr.psql

  -- index name -> entries read from it so far
  local function reads()
    local r = {}
    for line in psql(("SELECT indexrelname || ' ' || idx_tup_read FROM" ..
        " pg_stat_user_indexes WHERE schemaname = '%s' AND relname = 'jobs'")
        :format(env.schema)):gmatch("[^\n]+") do
      local name, n = line:match("^(%S+) (%d+)$")
      r[name] = tonumber(n)
    end
    return r
  end

  -- the counts once every backend's are in: a backend sends its counts
  -- when it exits, which can be after its client has gone
  local function settled_reads()
    local prev = reads()
    for _ = 1, 20 do
      jr.sleep(0.5)
      local cur, same = reads(), true
      for k, v in pairs(cur) do same = same and prev[k] == v end
      if same then return cur end
      prev = cur
    end
    return prev
  end

  -- Another session holds a repeatable-read snapshot, asleep in it, until
  -- the test ends (ended then by its application name).
  local function hold_snapshot()
    local tag = ("jr_snapshot_%d"):format(math.random(1, 1e9))
    jr.sh(("PGAPPNAME=%s psql -X -q %s -c %s -c %s -c %s >/dev/null 2>&1 &")
      :format(tag, jr.quote(jr.pg_url),
              jr.quote("BEGIN ISOLATION LEVEL REPEATABLE READ"),
              jr.quote("SELECT 1"), jr.quote("SELECT pg_sleep(600)")))
    finally(function()
      psql(("SELECT pg_terminate_backend(pid) FROM pg_stat_activity" ..
            " WHERE application_name = '%s'"):format(tag))
    end)
    jr.wait_for(function()
      return psql(("SELECT count(*) FROM pg_stat_activity WHERE" ..
        " application_name = '%s' AND backend_xmin IS NOT NULL"):format(tag))
        :match("1") ~= nil
    end, 30, "the held snapshot")
    return tag
  end

  it("reads the claim and lease indexes in proportion to the jobs", function()
    env:config("concurrency = 2")
    env:script("rec", jr.LEDGER)
    env:cli("migrate")
    local tag = hold_snapshot()
    env:exec(("INSERT INTO jobs (name, payload) SELECT 'rec', '{}'" ..
              " FROM generate_series(1, %d)"):format(N))
    local before = settled_reads()
    local ledger = env.dir .. "/ledger"
    local p = env:start(jr.ledger_env(ledger))
    jr.wait_for(function() return jr.ledger_count(ledger) >= N end,
                300, "drain")
    assert.equal(0, env:stop("TERM", p))
    local after = settled_reads()
    -- the snapshot held for the whole drain: every deleted row is still
    -- there, dead
    assert.truthy(tonumber(psql(("SELECT count(*) FROM pg_stat_activity" ..
      " WHERE application_name = '%s' AND backend_xmin IS NOT NULL")
      :format(tag))) == 1, "the snapshot was held to the end")
    -- from the front every time, the claims read about N * N / (2 * batch)
    -- entries (over 100 * N with batches of a few hundred); from their
    -- place, the batch and the other connection's last one, and a claim
    -- from the front every half second
    local claim = after.jobs_claim - before.jobs_claim
    assert(claim <= 40 * N, ("jobs_claim: %d entries read to claim %d jobs")
      :format(claim, N))
    -- the DELETEs found their ids through jobs_lease when the planner
    -- chose it, every running entry (dead ones included) at each; by the
    -- primary key, none (a rescue reads only leases already over)
    local lease = after.jobs_lease - before.jobs_lease
    assert(lease <= N / 10, ("jobs_lease: %d entries read to finish %d jobs")
      :format(lease, N))
  end)

  -- A vacuum while the same snapshot is held as at the last one can
  -- remove nothing that one did not, and reads the whole table and its
  -- indexes for it (half a second a time by 200,000 jobs): the runner
  -- refreshes the statistics only.
  it("vacuums once while the snapshot stays, then only analyzes", function()
    local n = 10000
    env:config("concurrency = 2, vacuum_every = 1000")
    env:script("rec", jr.LEDGER)
    env:cli("migrate")
    hold_snapshot()
    local function counts()
      local v, a = psql(("SELECT vacuum_count || ' ' || analyze_count FROM" ..
        " pg_stat_user_tables WHERE schemaname = '%s' AND relname = 'jobs'")
        :format(env.schema)):match("(%d+) (%d+)")
      return tonumber(v), tonumber(a)
    end
    local v0, a0 = counts()
    env:exec(("INSERT INTO jobs (name, payload) SELECT 'rec', '{}'" ..
              " FROM generate_series(1, %d)"):format(n))
    local ledger = env.dir .. "/ledger"
    local p = env:start(jr.ledger_env(ledger))
    jr.wait_for(function() return jr.ledger_count(ledger) >= n end, 300,
                "drain")
    -- a vacuum (or analyze) every 1,000 finished jobs: several by now
    jr.wait_for(function()
      local v, a = counts()
      return (v - v0) + (a - a0) >= 4
    end, 60, "the runner's vacuums")
    assert.equal(0, env:stop("TERM", p))
    local v, a = counts()
    -- the first vacuum finds the snapshot; from then on it is the same
    assert(v - v0 <= 1, ("%d vacuums, %d analyzes"):format(v - v0, a - a0))
  end)

  -- The place is only a hint: a job queued before it (here one of a
  -- higher priority, pushed in the middle of a drain) sends a wake-up,
  -- which makes the next claim start from the front again. Trusted
  -- instead, the place would leave it for the end of the backlog.
  it("still starts a job queued before the place first", function()
    local n = 3000
    env:config("concurrency = 1")
    -- 1 ms of CPU a job: the drain lasts seconds
    env:script("rec", [[
      return function(job)
        local t = os.clock() + 0.001
        while os.clock() < t do end
        local f = assert(io.open(os.getenv("JR_LEDGER"), "a"))
        f:write(job.id, "\n")
        f:close()
      end]])
    env:cli("migrate")
    env:exec(("INSERT INTO jobs (name, payload) SELECT 'rec', '{}'" ..
              " FROM generate_series(1, %d)"):format(n))
    local ledger = env.dir .. "/ledger"
    local p = env:start(jr.ledger_env(ledger))
    jr.wait_for(function() return jr.ledger_count(ledger) >= 200 end, 60,
                "the first jobs")
    local urgent = env:push("rec", "{}", "--priority", "-5")
    local ran = jr.ledger_count(ledger)
    jr.wait_for(function() return jr.ledger_count(ledger) >= n + 1 end,
                300, "drain")
    assert.equal(0, env:stop("TERM", p))
    local at
    for i, id in ipairs(jr.lines(ledger)) do
      if tonumber(id) == tonumber(urgent) then at = i end
    end
    assert(at, "the urgent job ran")
    -- after those that had run when it was pushed, at most those the
    -- runner holds (480 on PostgreSQL) and a claim in flight (512); the
    -- end of the backlog is far behind
    assert(at <= ran + 1000, ("the urgent job started %dth of %d, pushed" ..
      " after %d had run"):format(at, n + 1, ran))
  end)
end)
