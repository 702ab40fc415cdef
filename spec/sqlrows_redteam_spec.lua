-- sqlrows_redteam_spec.lua - statement texts that look like the INSERT
-- jobrunner.sql runs as one multi-row INSERT on PostgreSQL but are not
-- (backends/postgres/sqlrows.c): each job's row must hold its own values,
-- as it would statement by statement.
local jr = require "jr"

local function seed(env, name, n)
  env:script("seed", ([[
    local jobrunner = require "jobrunner"
    return function()
      for k = 1, %d do jobrunner.push(%q, { k = k }) end
    end]]):format(n, name))
  env:push("seed")
end

local function drained(env)
  jr.wait_for(function()
    return env:count("queued") == 0 and env:count("running") == 0
  end, 60)
end

describe("postgres jobrunner.sql, texts like one multi-row INSERT that are not:", function()
  local env = jr.test_env("postgres")

  -- Runs 40 jobs of a handler inserting (job, k) by text sql into table
  -- t, made by cols (after make, run as it is), and checks every job wrote
  -- its own k once, and nothing failed.
  local function own_rows(t, cols, make, sql, want_job)
    jr.psql("CREATE SCHEMA IF NOT EXISTS " .. env.schema)
    if make then jr.psql(make) end
    jr.psql(("CREATE TABLE %s.%s (%s)"):format(env.schema, t, cols))
    env:script("pay", ([[
      local jobrunner = require "jobrunner"
      return { max_retries = 0, handle = function(job)
        jobrunner.sql(%q, job.id, job.payload.k)
      end }]]):format(sql:gsub("TABLE", env.schema .. "." .. t):gsub("TYPE", "x'y" .. env.schema)))
    env:start()
    seed(env, "pay", 40)
    drained(env)
    local got = env:query("SELECT job, k, c FROM " .. env.schema .. "." .. t .. " ORDER BY k")
    assert.equal(40, #got)
    local jobs = {}
    for _, j in ipairs(env:jobs("name = 'pay'")) do jobs[j.id] = j.payload end
    for i, r in ipairs(got) do
      assert.equal(i, math.tointeger(r.k))
      assert.equal(i + (want_job and math.tointeger(r.job) or 0), math.tointeger(r.c), "row of job " .. tostring(r.job))
    end
    assert.equal(0, #env:jobs("state = 'dead'"))
    assert.equal(0, env:stop())
  end

  it("a line comment holding a quote: the row after it is not a string", function()
    -- sqlrows.c read `-- '` as the start of a string running to the next
    -- line's quote, left the $1 there unrenumbered: every row took the
    -- first job's id
    own_rows("cmt", "job bigint PRIMARY KEY, k bigint, c bigint", nil,
      "INSERT INTO TABLE (job, k, c) VALUES ($1::bigint, $2::bigint, $2::bigint -- '\n"
      .. " + $1::bigint -- '\n)", true)
  end)

  it("a cast to a quoted type name holding a quote", function()
    own_rows("qty", "job bigint PRIMARY KEY, k bigint, c bigint, d bigint",
      -- (in public: handlers' search_path)
      ("CREATE DOMAIN public.\"x'y%s\" AS bigint"):format(env.schema),
      "INSERT INTO TABLE (k, job, c, d) VALUES ($2::bigint, $1::\"TYPE\", $2::bigint, $1::\"TYPE\")")
  end)
end)
