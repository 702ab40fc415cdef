-- claim_plan_spec.lua - PostgreSQL: the runner's claims walk the claim
-- index whatever the statistics say. After a drain the table is vacuumed
-- and analyzed with no live row; a backlog pushed since is then priced at
-- nothing, and the planner chose a sequential (or bitmap) scan and a sort
-- for the claim: every claim read every queued job. The connections that
-- claim plan neither (backends/postgres/conn.c session_setup), so a drain of
-- such a backlog reads the jobs table by index only: its sequential scan
-- count does not move.
local jr = require "jr"

if not jr.pg_url or (os.getenv("JR_BACKENDS") or "postgres"):find("postgres") == nil then
  return
end

describe("postgres: claims on stale statistics", function()
  local env = jr.test_env("postgres")

  local psql = jr.psql

  local function seq_scans()
    return tonumber(psql(("SELECT seq_scan FROM pg_stat_user_tables" ..
      " WHERE schemaname = '%s' AND relname = 'jobs'"):format(env.schema)))
  end

  -- the count once the setup's own scans are in: a backend sends its
  -- counts when it exits, which can be after its client has gone (the
  -- DELETE below scans the table; under load its count arrived after the
  -- drain had started and was taken for the runner's)
  local function settled_seq_scans()
    local prev = seq_scans()
    for _ = 1, 20 do
      jr.sleep(0.5)
      local cur = seq_scans()
      if cur == prev then return cur end
      prev = cur
    end
    return prev
  end

  for _, limits in ipairs({ false, true }) do
    it("drains a backlog pushed after an empty analyze without a sequential scan" ..
       (limits and ", under limits per key" or ""), function()
      env:config('concurrency = 2' .. (limits and
        ', limits = { rec = { per_key = { concurrency = 4 } } }' or ''))
      env:script("rec", jr.LEDGER)
      env:cli("migrate")
      local jobs = ('"%s".jobs'):format(env.schema)
      -- the table has pages but no live row when analyzed: its density
      -- is zero, so any backlog is estimated at no row at all
      env:exec("INSERT INTO jobs (name, payload) SELECT 'old', '{}'" ..
               " FROM generate_series(1, 2000)")
      env:exec("DELETE FROM jobs")
      psql("VACUUM (ANALYZE, TRUNCATE false) " .. jobs)
      env:exec("INSERT INTO jobs (name, payload) SELECT 'rec'," ..
               " json_build_object('key', g % 50)::jsonb" ..
               " FROM generate_series(1, 20000) g")
      local before = settled_seq_scans()
      local ledger = env.dir .. "/ledger"
      -- and the runner's sessions price index pages dear, as a table's
      -- statistics can: a plan made on costs alone would read it whole
      local p = env:start(jr.ledger_env(ledger) .. " PGOPTIONS=" ..
        jr.quote("-c random_page_cost=1000 -c cpu_index_tuple_cost=10"))
      jr.wait_for(function() return jr.ledger_count(ledger) >= 20000 end,
                  120, "drain")
      assert.equal(0, env:stop("TERM", p))
      -- the runner's sessions have ended: their counts are in. A plan
      -- that reads the table whole does it at every claim, hundreds of
      -- times in this drain; a few scans more are tolerated, from outside
      -- the claims (the runner's timed reads, more of them the slower the
      -- drain on a loaded machine; a backend's count can arrive late: see
      -- settled_seq_scans)
      local after = settled_seq_scans()
      assert(after - before <= 4, ("%d sequential scans of jobs during the" ..
        " drain"):format(after - before))
    end)
  end
end)
