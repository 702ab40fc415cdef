-- sqlrows_spec.lua - jobrunner.sql's identical INSERTs of jobs recorded
-- together: on PostgreSQL, run as one multi-row INSERT into a table
-- without triggers, rules or row security, one statement a job into one
-- with any (docs/handlers.md, "Writes that commit with the job"); on both
-- engines each row is written once with its job, and a failing row fails
-- its job only.
local jr = require "jr"
local cjson = require "cjson"

-- A table of env named as handlers name it (the env's schema on
-- PostgreSQL), made by the column list cols.
local function make(env, name, cols)
  if env.backend == "postgres" then
    jr.psql("CREATE SCHEMA IF NOT EXISTS " .. env.schema)
    jr.psql(("CREATE TABLE %s.%s (%s)"):format(env.schema, name, cols))
    return env.schema .. "." .. name
  end
  env:exec(("CREATE TABLE %s (%s)"):format(name, cols))
  return name
end

-- The handler "seed" pushes n jobs of name, payload {k = 1..n}, at its
-- success: one claim then takes them all, and they end in few rounds.
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

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " jobrunner.sql, identical statements of a round:", function()
    local env = jr.test_env(backend)

    it("writes every row once with its own values; a failing row fails only its job", function()
      local t = make(env, "rows", "job bigint PRIMARY KEY, k bigint CHECK (k <> 7),"
        .. " s text, lit text, b boolean, f double precision, big bigint, n text")
      -- strings with quotes, a literal holding a '$2' the parameters'
      -- numbering must leave alone, a cast, NULL, booleans, floats,
      -- integers beyond 2^53
      env:script("pay", ([[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          local k = job.payload.k
          jobrunner.sql("INSERT INTO %s (job, k, s, lit, b, f, big, n) VALUES"
            .. " ($1, $2, $3%s, 'a''$2', $4, $5, $6, $7)",
            job.id, k, "'" .. k, k %% 2 == 0, k + 0.5, 9007199254740993 + k, nil)
        end }]]):format(t, backend == "postgres" and "::text" or ""))
      env:start()
      seed(env, "pay", 40)
      drained(env)
      local got = env:query("SELECT job, k, s, lit, b, f, CAST(big AS TEXT) AS big, n FROM "
        .. t .. " ORDER BY k")
      assert.equal(39, #got)
      for _, r in ipairs(got) do
        local k = math.tointeger(r.k)
        assert.is_not.equal(7, k)
        assert.equal("'" .. k, r.s)
        assert.equal("a'$2", r.lit)
        assert.equal(k % 2 == 0, r.b == true or r.b == 1)
        assert.equal(k + 0.5, r.f)
        assert.equal(tostring(9007199254740993 + k), r.big)
        assert.equal(cjson.null, r.n)
      end
      local dead = env:jobs("state = 'dead'")
      assert.equal(1, #dead)
      assert.truthy(dead[1].last_error:find("jobrunner.sql statement 1 of 'pay' failed", 1, true),
        dead[1].last_error)
      if backend == "postgres" then
        assert.truthy(dead[1].last_error:find("SQLSTATE 23514", 1, true), dead[1].last_error)
      end
      assert.equal(0, env:stop())
    end)

    it("fires a statement trigger once a statement, into a table that has one", function()
      local t = make(env, "trig", "job bigint PRIMARY KEY")
      local c = make(env, "fired", "n bigint")
      env:exec("INSERT INTO fired (n) VALUES (0)")
      if backend == "postgres" then
        jr.psql(([[CREATE FUNCTION %s.bump() RETURNS trigger LANGUAGE plpgsql AS
          $$ BEGIN UPDATE %s SET n = n + 1; RETURN NULL; END $$;
          CREATE TRIGGER bump AFTER INSERT ON %s FOR EACH STATEMENT
          EXECUTE FUNCTION %s.bump()]]):format(env.schema, c, t, env.schema))
      else
        env:exec("CREATE TRIGGER bump AFTER INSERT ON trig BEGIN"
          .. " UPDATE fired SET n = n + 1; END")
      end
      env:script("pay", ([[
        local jobrunner = require "jobrunner"
        return function(job)
          jobrunner.sql("INSERT INTO %s (job) VALUES ($1)", job.id)
        end]]):format(t))
      env:start()
      seed(env, "pay", 40)
      drained(env)
      assert.equal(40, #env:query("SELECT job FROM " .. t))
      assert.equal(40, env:query("SELECT n FROM " .. c)[1].n)
      assert.equal(0, env:stop())
    end)

    it("honours a trigger and a column added while it runs, from its next batch", function()
      local t = make(env, "later", "job bigint PRIMARY KEY")
      local c = make(env, "fired", "n bigint")
      env:exec("INSERT INTO fired (n) VALUES (0)")
      env:script("pay", ([[
        local jobrunner = require "jobrunner"
        return function(job)
          jobrunner.sql("INSERT INTO %s (job) VALUES ($1)", job.id)
        end]]):format(t))
      env:start()
      seed(env, "pay", 40)      -- its INSERTs prepared as rows of one
      drained(env)
      env:exec("ALTER TABLE later ADD COLUMN c text DEFAULT 'x'")
      if backend == "postgres" then
        jr.psql(([[CREATE FUNCTION %s.bump() RETURNS trigger LANGUAGE plpgsql AS
          $$ BEGIN UPDATE %s SET n = n + 1; RETURN NULL; END $$;
          CREATE TRIGGER bump AFTER INSERT ON %s FOR EACH STATEMENT
          EXECUTE FUNCTION %s.bump()]]):format(env.schema, c, t, env.schema))
      else
        env:exec("CREATE TRIGGER bump AFTER INSERT ON later BEGIN"
          .. " UPDATE fired SET n = n + 1; END")
      end
      seed(env, "pay", 40)
      drained(env)
      assert.equal(80, #env:query("SELECT job FROM " .. t .. " WHERE c = 'x'"))
      assert.equal(40, env:query("SELECT n FROM " .. c)[1].n)
      assert.equal(0, env:stop())
    end)
  end)
end
