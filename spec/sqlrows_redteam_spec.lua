-- sqlrows_redteam_spec.lua - statement texts that look like the INSERT
-- jobrunner.sql runs as one multi-row INSERT on PostgreSQL but are not
-- (backends/postgres/sqlrows.c): each job's row must hold its own values,
-- as it would statement by statement.
local jr = require "jr"
local cjson = require "cjson"

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
    return env:idle()
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

  it("a duplicate key between two jobs and a NULL in row 37 fail those jobs alone, at their statement", function()
    jr.psql("CREATE SCHEMA IF NOT EXISTS " .. env.schema)
    local t = env.schema .. ".dup"
    jr.psql("CREATE TABLE " .. t .. " (key bigint PRIMARY KEY, job bigint NOT NULL, v bigint NOT NULL)")
    -- two statements of one text a job: job k writes keys 2k and 2k+1,
    -- but k = 50 writes 2*49+1 as its second, and k = 37 a NULL there
    env:script("pay", ([[
      local jobrunner = require "jobrunner"
      return { max_retries = 0, handle = function(job)
        local k = job.payload.k
        local sql = "INSERT INTO %s (key, job, v) VALUES ($1, $2, $3)"
        jobrunner.sql(sql, 2 * k, job.id, k)
        jobrunner.sql(sql, k == 50 and 2 * 49 + 1 or 2 * k + 1, job.id, k ~= 37 and k or nil)
      end }]]):format(t))
    env:start()
    seed(env, "pay", 70)
    drained(env)
    local dead, rows = env:jobs("state = 'dead'"), {}
    assert.equal(2, #dead)
    local byk = {}
    for _, j in ipairs(dead) do
      byk[math.tointeger(cjson.decode(j.payload).k)] = j
      assert.truthy(j.last_error:find("jobrunner.sql statement 2 of 'pay' failed", 1, true), j.last_error)
    end
    assert.truthy(byk[37].last_error:find("SQLSTATE 23502", 1, true), byk[37].last_error)
    local twin = byk[50] or byk[49]
    assert.truthy(twin.last_error:find("SQLSTATE 23505", 1, true), twin.last_error)
    for _, r in ipairs(env:query("SELECT key, job, v FROM " .. t)) do
      local j = math.tointeger(r.job)
      rows[j] = (rows[j] or 0) + 1
    end
    for _, j in ipairs(env:jobs("name = 'pay'")) do
      assert.equal(j.state == "dead" and 0 or 2, rows[math.tointeger(j.id)] or 0, "rows of job " .. j.id)
    end
    assert.equal(0, env:stop())
  end)

  -- Runs 70 jobs of a handler inserting its job id by "INSERT INTO
  -- name (job) VALUES ($1)" after make (the schema's name for %s).
  local function seventy(name, make)
    jr.psql("CREATE SCHEMA IF NOT EXISTS " .. env.schema)
    jr.psql((make:gsub("%%s", env.schema)))
    env:script("pay", ([[
      local jobrunner = require "jobrunner"
      return { max_retries = 0, handle = function(job)
        jobrunner.sql("INSERT INTO %s (job) VALUES ($1)", job.id)
      end }]]):format(env.schema .. "." .. name))
    env:start()
    seed(env, "pay", 70)
    drained(env)
    assert.equal(0, #env:jobs("state = 'dead'"))
  end

  -- The function takes a lock held to its transaction's end: two
  -- connections completing batches at once would otherwise count the
  -- same committed rows, whether or not their rows were combined.
  it("a column default whose volatile function reads the table sees every earlier row", function()
    seventy("vol", [[CREATE TABLE %s.vol (job bigint PRIMARY KEY);
      CREATE FUNCTION %s.nrows() RETURNS bigint LANGUAGE plpgsql VOLATILE AS
      $$ BEGIN PERFORM pg_advisory_xact_lock(7411);
      RETURN (SELECT count(*) FROM %s.vol); END $$;
      ALTER TABLE %s.vol ADD COLUMN seen bigint DEFAULT %s.nrows()]])
    local got = env:query("SELECT count(DISTINCT seen) AS d, count(*) AS n FROM " .. env.schema .. ".vol")
    assert.equal(70, got[1].n)
    assert.equal(70, got[1].d)
    assert.equal(0, env:stop())
  end)

  it("a partitioned table with a statement trigger takes each job's row once, a statement a job", function()
    seventy("part", [[CREATE TABLE %s.n (n bigint);
      INSERT INTO %s.n VALUES (0);
      CREATE TABLE %s.part (job bigint) PARTITION BY RANGE (job);
      CREATE TABLE %s.part_a PARTITION OF %s.part FOR VALUES FROM (MINVALUE) TO (40);
      CREATE TABLE %s.part_b PARTITION OF %s.part FOR VALUES FROM (40) TO (MAXVALUE);
      CREATE FUNCTION %s.bump() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN UPDATE %s.n SET n = n + 1; RETURN NULL; END $$;
      CREATE TRIGGER bump AFTER INSERT ON %s.part FOR EACH STATEMENT EXECUTE FUNCTION %s.bump()]])
    local got = env:query("SELECT count(DISTINCT job) AS d, count(*) AS n FROM " .. env.schema .. ".part")
    assert.equal(70, got[1].n)
    assert.equal(70, got[1].d)
    assert.equal(70, env:query("SELECT n FROM " .. env.schema .. ".n")[1].n)
    assert.equal(0, env:stop())
  end)

  it("the rows of a job that fails or is discarded after recording them are never written", function()
    jr.psql("CREATE SCHEMA IF NOT EXISTS " .. env.schema)
    local t = env.schema .. ".gone"
    jr.psql("CREATE TABLE " .. t .. " (job bigint NOT NULL, k bigint NOT NULL)")
    env:script("pay", ([[
      local jobrunner = require "jobrunner"
      return { max_retries = 0, handle = function(job)
        local k = job.payload.k
        for _ = 1, 3 do jobrunner.sql("INSERT INTO %s (job, k) VALUES ($1, $2)", job.id, k) end
        if k %% 5 == 0 then error("no") end
        if k %% 7 == 0 then jobrunner.discard("gone") end
      end }]]):format(t))
    env:start()
    seed(env, "pay", 70)
    drained(env)
    local n = {}
    for _, r in ipairs(env:query("SELECT k, count(*) AS c FROM " .. t .. " GROUP BY k")) do
      n[math.tointeger(r.k)] = math.tointeger(r.c)
    end
    for k = 1, 70 do
      assert.equal((k % 5 == 0 or k % 7 == 0) and 0 or 3, n[k] or 0, "rows of k " .. k)
    end
    assert.equal(0, env:stop())
  end)
end)
