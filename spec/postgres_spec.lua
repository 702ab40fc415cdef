-- postgres_spec.lua - what only PostgreSQL does: many runners on one queue,
-- a server restart in the middle of a drain, enqueueing from SQL inside the
-- application's transaction, LISTEN/NOTIFY wake-ups.
local jr = require "jr"
local pg = require "pgcluster"

if not jr.pg_url or (os.getenv("JR_BACKENDS") or "postgres"):find("postgres") == nil then
  return
end

local RECORD = jr.LEDGER

local function ledger_counts(path)
  local counts, total = {}, 0
  for line in io.lines(path) do
    local id = tonumber(line)
    counts[id] = (counts[id] or 0) + 1
    total = total + 1
  end
  return counts, total
end

local function psql(env, sql)
  local out, err, code = jr.sh(("psql -X -q -A -t -v ON_ERROR_STOP=1 %s -c %s"):format(
    jr.quote(jr.pg_url), jr.quote(sql)))
  assert(code == 0, "psql failed: " .. err)
  return out
end

describe("postgres:", function()
  local env = jr.test_env("postgres", { config = "concurrency = 2" })

  it("three runners drain 20,000 jobs, each recorded exactly once", function()
    env:script("rec", RECORD)
    env:cli("migrate")
    env:exec("INSERT INTO jobs (name, payload) SELECT 'rec', '{}' FROM generate_series(1, 20000)")
    local ledger = env.dir .. "/ledger"
    local extra = "JR_LEDGER=" .. jr.quote(ledger)
    local runners = { env:start(extra), env:start(extra), env:start(extra) }
    jr.wait_for(function() return env:count() == 0 end, 120, "drain")
    for _, p in ipairs(runners) do assert.equal(0, env:stop("TERM", p)) end
    local counts, total = ledger_counts(ledger)
    assert.equal(20000, total)
    local ids = env:query("SELECT min(id) AS lo FROM (SELECT 1 AS id) t")
    assert.is_table(ids)
    local distinct = 0
    for _, n in pairs(counts) do
      assert.equal(1, n)
      distinct = distinct + 1
    end
    assert.equal(20000, distinct)
  end)

  it("keeps running through a server restart mid-drain and completes every job", function()
    -- a cluster of its own: a restart of the shared one would cut off the
    -- PostgreSQL specs that spec/run runs beside this one
    local c = pg.start()
    local shared = jr.pg_url
    finally(function()
      jr.pg_url = shared
      pg.stop(c)
    end)
    jr.pg_url = c.url
    env.url = c.url
    env:config("concurrency = 2")
    env:script("rec", [[
      local busy = require "_busy"
      return function(job)
        busy(0.0005)
        local f = assert(io.open(os.getenv("JR_LEDGER"), "a"))
        f:write(job.id, "\n")
        f:close()
      end]])
    env:script("_busy", [[
      local jobrunner = require "jobrunner"
      return function(s)
        local t = jobrunner.now() + s
        while jobrunner.now() < t do end
      end]])
    env:cli("migrate")
    env:exec("INSERT INTO jobs (name, payload) SELECT 'rec', '{}' FROM generate_series(1, 5000)")
    local ledger = env.dir .. "/ledger"
    local p = env:start("JR_LEDGER=" .. jr.quote(ledger))
    jr.wait_for(function() return jr.ledger_count(ledger) >= 500 end, 60,
                "first 500 jobs")
    pg.restart(c)
    jr.wait_for(function() return env:count() == 0 end, 120, "drain after restart")
    assert.is_true(env:alive(p), "runner exited")
    assert.matches("database", env:log(p))
    assert.equal(0, env:stop("TERM", p))
    local counts, total = ledger_counts(ledger)
    local distinct = 0
    for _ in pairs(counts) do distinct = distinct + 1 end
    assert.equal(5000, distinct)          -- none lost
    assert.is_true(total >= 5000)        -- at-least-once
  end)

  -- Latency is make bench's business; this proves the wake-up: with a
  -- poll interval of ten minutes only the commit's notification can start
  -- the job within the minute.
  it("runs a job pushed by SQL only if its transaction commits, woken by the commit", function()
    env:config("poll_interval = 600")
    env:script("fromsql", [[
      local jobrunner = require "jobrunner"
      return function(job)
        local f = assert(io.open(os.getenv("PWD") .. "/ran." .. job.payload.tag, "w"))
        f:write(jobrunner.now() - job.created_at)
        f:close()
      end]])
    env:start()
    local schema = env.schema
    psql(env, ("BEGIN; SELECT %s.push('fromsql', '{\"tag\":\"rolled\"}'); ROLLBACK;"):format(schema))
    -- idle runner: wait for the runner to be surely idle, then commit one
    psql(env, ("BEGIN; SELECT %s.push('fromsql', '{\"tag\":\"committed\"}'); COMMIT;"):format(schema))
    local delay = jr.wait_file(env.dir .. "/ran.committed", 60)
    assert.is_true(tonumber(delay) < 60, "took " .. delay .. " s")
    jr.wait_for(function() return env:count() == 0 end)
    assert.is_nil(jr.read_file(env.dir .. "/ran.rolled"))
    -- the push function's defaults and arguments
    local id = tonumber(psql(env, ("SELECT %s.push('other', '{\"a\":1}', now() + interval '1 hour', 7, 'q9', 4)"):format(schema)))
    local row = env:job(id)
    assert.equal("other", row.name)
    assert.equal(7, row.priority)
    assert.equal("q9", row.queue)
    assert.equal(4, row.max_retries)
    assert.is_true(row.run_at - row.db_now > 3000)
  end)

  it("refuses invalid JSON and bad names in the database itself", function()
    env:cli("migrate")
    local _, err, code = jr.sh(("psql -X -q -v ON_ERROR_STOP=1 %s -c %s"):format(
      jr.quote(jr.pg_url), jr.quote(("SELECT %s.push('x', '{bad')"):format(env.schema))))
    assert.is_not.equal(0, code)
    assert.matches("json", err)
    _, err, code = jr.sh(("psql -X -q -v ON_ERROR_STOP=1 %s -c %s"):format(
      jr.quote(jr.pg_url), jr.quote(("SELECT %s.push('bad name', '{}')"):format(env.schema))))
    assert.is_not.equal(0, code)
    assert.matches("check", err:lower())
    assert.equal(0, env:count())
  end)

  it("creates everything in its own schema", function()
    env:cli("migrate")
    local out = psql(env, ("SELECT string_agg(table_name, ',' ORDER BY table_name) FROM information_schema.tables WHERE table_schema = '%s'"):format(env.schema))
    assert.matches("jobs", out)
    out = psql(env, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' AND table_name = 'jobs'")
    assert.equal("0", out:match("%d+"))
  end)

  -- a role of its own (roles are the cluster's), dropped with what it owns
  local function make_role(env)
    local role = "r_" .. env.schema
    psql(env, ("CREATE ROLE %s LOGIN"):format(role))
    finally(function()
      psql(env, ("DROP OWNED BY %s CASCADE; DROP ROLE %s"):format(role, role))
    end)
    env.url = jr.pg_url:gsub("user=postgres", "user=" .. role)
    env:config("")
    return role
  end

  it("migrates as a role that owns its schema, without CREATE on the database", function()
    local role = make_role(env)
    psql(env, ("CREATE SCHEMA %s AUTHORIZATION %s"):format(env.schema, role))
    local out, err, code = env:cli("migrate")
    assert.equal(0, code, out .. err)
    env:script("ok", jr.RECORD .. [[return function(job) record("ran", job.id) end]])
    env:start()
    local id = env:push("ok")
    assert.equal(tostring(id), jr.wait_file(env.dir .. "/ran", 30):match("%d+"))
    assert.equal(0, env:stop())
  end)

  it("names the privilege a role lacks to migrate, and on what", function()
    local role = make_role(env)
    local _, err, code = env:cli("migrate")
    assert.is_not.equal(0, code)
    assert.matches(("schema '%s' does not exist and role '%s' may not create it: "
      .. "it needs CREATE on database 'postgres'"):format(env.schema, role), err, 1, true)
    psql(env, ("CREATE SCHEMA %s; GRANT USAGE ON SCHEMA %s TO %s"):format(
      env.schema, env.schema, role))
    _, err, code = env:cli("migrate")
    assert.is_not.equal(0, code)
    assert.matches(("role '%s' may not create objects in schema '%s': it needs "
      .. "CREATE on the schema"):format(role, env.schema), err, 1, true)
  end)

  it("sets its own session timeouts: a statement_timeout on its role does not cripple it", function()
    local role = make_role(env)
    local s = env.schema
    psql(env, ("GRANT CREATE ON DATABASE postgres TO %s"):format(role))
    local out, err, code = env:cli("migrate")
    assert.equal(0, code, out .. err)
    -- every row a claim takes costs 5 ms: a 1 ms statement_timeout would
    -- cancel every claim, and a 1 s idle_session_timeout would close the
    -- runner's idle connections
    psql(env, ([[CREATE FUNCTION %s.slow() RETURNS trigger LANGUAGE plpgsql
      AS $$ BEGIN PERFORM pg_sleep(0.005); RETURN NEW; END $$;
      CREATE TRIGGER slow BEFORE UPDATE ON %s.jobs FOR EACH ROW
      EXECUTE FUNCTION %s.slow()]]):format(s, s, s))
    psql(env, ("ALTER ROLE %s SET statement_timeout = '1ms';"
      .. " ALTER ROLE %s SET idle_session_timeout = '1s'"):format(role, role))
    env:config("poll_interval = 0.2")
    env:script("ok", jr.RECORD .. [[return function(job) record("ran", job.id) end]])
    local p = env:start()
    psql(env, ("SELECT %s.push('ok') FROM generate_series(1, 30)"):format(s))
    jr.wait_for(function() return #jr.lines(env.dir .. "/ran") >= 30 end, 60, "30 jobs run")
    -- a connection that is not the runner's keeps the role's settings; the
    -- error names the timeout
    local dead = psql(env, ("SELECT %s.push('gone')"):format(s)):match("%d+")
    psql(env, ("UPDATE %s.jobs SET state = 'dead' WHERE id = %s"):format(s, dead))
    out, err, code = env:cli("dead", "retry", dead)
    assert.is_not.equal(0, code, out)
    assert.matches("canceling statement due to statement timeout [SQLSTATE 57014]", err, 1, true)
    psql(env, ("ALTER ROLE %s RESET ALL"):format(role))
    assert.equal(0, env:stop())
    assert.is_nil(env:log(p):find("lost", 1, true), env:log(p))
  end)

  it("refuses a schema name that is not a plain identifier", function()
    env:config('schema = "x; DROP TABLE y"')
    local _, err, code = env:cli("migrate")
    assert.is_not.equal(0, code)
    assert.matches("schema", err)
  end)

  it("refuses a system schema: pg_ names and information_schema", function()
    for _, name in ipairs({ "pg_catalog", "information_schema" }) do
      env:config(('schema = %q'):format(name))
      local _, err, code = env:cli("migrate")
      assert.is_not.equal(0, code, name)
      assert.matches("invalid PostgreSQL schema name '" .. name .. "'", err, 1, true)
    end
    -- nothing was made there
    assert.equal("0", (jr.psql("SELECT count(*) FROM pg_tables WHERE schemaname" ..
      " = 'information_schema' AND tablename = 'migrations'"):gsub("%s+", "")))
  end)
end)
