-- plan_cache_spec.lua - PostgreSQL: the runner's statements of a round are
-- planned once, not at every execution. A prepared statement runs on a
-- custom plan (planned again at each bind) for its first five executions,
-- then on its generic plan if that is priced no higher than the custom ones
-- were. The completion's DELETE tested its ids with = ANY of the array
-- parameter: a custom plan for one id was priced below the generic plan's
-- estimate of 10, so a runner finishing its jobs one at a time planned that
-- DELETE at every completion (0.1 to 0.2 ms of the server's, ten times its
-- execution). The ids are now read through an InitPlan (pg_int.h,
-- JR_PG_IDS). On a cluster of its own with pg_stat_statements loaded
-- (track_planning: its plans column counts the planner's runs), jobs
-- finished one at a time: the DELETE, the claim and the claim under limits
-- per key are planned at most the five custom times and the generic one.
-- Each is told by its own text (its ids' InitPlan): the prunes and the
-- sweeps also delete or update by an id array, and run on timers
-- (pg_stat_statements shows a constant as a parameter: $4 is 'running').
local jr = require "jr"

if not jr.pg_url or (os.getenv("JR_BACKENDS") or "postgres"):find("postgres") == nil then
  return
end

local N = 8

describe("postgres: plans of the runner's per-job statements", function()
  local env = jr.test_env("postgres")
  local cluster

  after_each(function()
    if cluster then
      jr.sh("spec/helpers/pgcluster.sh stop " .. jr.quote(cluster))
      cluster = nil
    end
  end)

  it("are cached: a completion of one job is not planned again each time", function()
    local extra = "shared_preload_libraries = 'pg_stat_statements'\n" ..
                  "pg_stat_statements.track_planning = on"
    local out, err, code = jr.sh("PGCLUSTER_EXTRA=" .. jr.quote(extra) ..
                                 " spec/helpers/pgcluster.sh start")
    assert.equal(0, code, err)
    local url = out:gsub("%s+$", "")
    cluster = assert(url:match("host=([^&]+)"), url)
    local function psql(sql)
      local o, e, c = jr.sh(("psql -X -q -A -t -v ON_ERROR_STOP=1 %s -c %s"):format(
        jr.quote(url), jr.quote(sql)))
      assert(c == 0, sql .. ": " .. e)
      return o
    end
    psql("CREATE EXTENSION pg_stat_statements")
    env.url = url
    env:config("")
    env:script("one", "return function() end")
    env:start()
    psql("SELECT pg_stat_statements_reset()")
    local function one_by_one(name, ...)
      for i = 1, N do
        env:push(name, "{}", ...)
        jr.wait_for(function()
          return tonumber(psql(("SELECT count(*) FROM %s.jobs"):format(env.schema))) == 0
        end, 20, name .. " job " .. i .. " done")
      end
    end
    one_by_one("one")
    -- a backend's counts are in the view once its statement ends
    local function stat(pattern)
      local row = psql(("SELECT sum(calls)::int || ' ' || sum(plans)::int" ..
        " FROM pg_stat_statements WHERE query LIKE '%s'"):format(pattern))
      local calls, plans = row:match("(%d+) (%d+)")
      return tonumber(calls) or 0, tonumber(plans) or 0
    end
    local calls, plans = stat(('DELETE FROM "%s".jobs WHERE id = ANY((SELECT $2%%'):format(env.schema))
    assert.is_true(calls >= N, "completions: " .. calls)
    assert.is_true(plans <= 6, ("the completion planned %d times in %d runs"):format(plans, calls))
    calls, plans = stat(('WITH RECURSIVE%%"%s".jobs%%'):format(env.schema))
    assert.is_true(calls >= N, "claims: " .. calls)
    assert.is_true(plans <= 6, ("the claim planned %d times in %d runs"):format(plans, calls))
    assert.equal(0, env:stop("TERM"))
    -- a claim under limits per key takes its candidates by id
    env:config("limits = { one = { per_key = { concurrency = 1 } } }")
    env:start()
    psql("SELECT pg_stat_statements_reset()")
    one_by_one("one", "--key", "k")
    calls, plans = stat(('UPDATE "%s".jobs j SET state = $4, fair_tag%%WHERE j.id = ANY((SELECT $3%%'):format(env.schema))
    assert.is_true(calls >= N, "limited claims: " .. calls)
    assert.is_true(plans <= 6, ("the limited claim planned %d times in %d runs"):format(plans, calls))
    assert.equal(0, env:stop("TERM"))
  end)
end)
