-- migration_names_spec.lua - a job's name and queue checked once a
-- distinct pair of an insert statement on PostgreSQL (migration 43: the
-- trigger jobs_names_ok, and jobs_names_moved at an UPDATE that changes
-- them), where a regex in each row's CHECKs cost 7% of a batch push;
-- SQLite's schema is unchanged (its CHECKs use GLOB). A database of the
-- schema before (42 on both) is brought forward by `jobrunner migrate`
-- with its jobs intact; then, on both engines, plain SQL with a bad name
-- or queue is refused whole (a statement of many rows with one bad one
-- inserts none), naming the constraint, as before; good rows go in and
-- run.
local jr = require "jr"

local WORKER = jr.RECORD .. [[
  return function(job) record("done", job.payload.n) end]]

local BEFORE = 42       -- the schema before this migration, on both

-- Runs sql on env's database: true, or false and the error's text.
local function try(env, sql)
  local _, err, code
  if env.backend == "postgres" then
    _, err, code = jr.sh(("psql -X -q -v ON_ERROR_STOP=1 %s -c %s"):format(
      jr.quote(jr.pg_url), jr.quote(("SET search_path TO %s; %s"):format(env.schema, sql))))
  else
    _, err, code = jr.sh(("sqlite3 -cmd '.timeout 10000' %s %s"):format(
      jr.quote(env:sqlite_path()), jr.quote(sql)))
  end
  return code == 0, err
end

local function count(env)
  return math.tointeger(env:query("SELECT count(*) AS n FROM jobs")[1].n)
end

-- The refusal of a bad name or queue: PostgreSQL's names the constraint
-- (the CHECK's before, the trigger's now, the same SQLSTATE 23514);
-- SQLite's CHECK says it failed.
local function refused(env, what, ok, err)
  assert.is_false(ok, "a bad " .. what .. " went in")
  if env.backend == "postgres" then
    assert.truthy(err:find('violates check constraint "jobs_' .. what .. '_check"', 1, true), err)
  else
    assert.truthy(err:find("CHECK constraint failed", 1, true), err)
  end
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migration 43 (names checked once a pair)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-" .. BEFORE .. " database with its jobs intact", function()
      jr.make_schema(env, BEFORE)
      local past = jr.past_later(env)
      env:exec(([[
        INSERT INTO jobs (name, payload, queue, state, run_at)
        VALUES ('mn.a', '{"n": 1}', 'q.1', 'queued', %s),
               ('mn.a', '{"n": 2}', 'default', 'queued', %s),
               ('mn:b-c_d', '{"n": 3}', 'default', 'dead', %s)]]):format(past, past, past))
      local before = jr.job_snapshot(env)
      env:config("concurrency = 1")
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))

      -- refused whole, naming what is wrong, as before
      refused(env, "name", try(env, "INSERT INTO jobs (name) VALUES ('mn bad')"))
      refused(env, "queue", try(env, "INSERT INTO jobs (name, queue) VALUES ('mn.a', 'q/1')"))
      refused(env, "name", try(env, "INSERT INTO jobs (name, payload) VALUES"
        .. " ('mn.a', '{\"n\": 10}'), ('mn.é', '{\"n\": 11}'), ('mn.a', '{\"n\": 12}')"))
      refused(env, "name", try(env, "INSERT INTO jobs (name) VALUES ('')"))
      refused(env, "name", try(env, "INSERT INTO jobs (name) VALUES ('" .. ("x"):rep(129) .. "')"))
      refused(env, "queue", try(env, "UPDATE jobs SET queue = 'q 1' WHERE name = 'mn.a'"))
      refused(env, "name", try(env, "UPDATE jobs SET name = 'mn a' WHERE state = 'dead'"))
      assert.are.equal(3, count(env))
      assert.are.same(before, jr.job_snapshot(env))

      -- good ones go in (the longest name too) and run
      assert(try(env, "INSERT INTO jobs (name, payload, queue) VALUES"
        .. " ('mn.a', '{\"n\": 4}', 'q.1'), ('mn.a', '{\"n\": 5}', 'default')"))
      assert(try(env, "INSERT INTO jobs (name) VALUES ('" .. ("x"):rep(128) .. "')"))
      assert(try(env, "UPDATE jobs SET queue = 'default' WHERE queue = 'q.1'"))
      assert(try(env, "DELETE FROM jobs WHERE name = '" .. ("x"):rep(128) .. "'"))
      env:script("mn.a", WORKER)
      env:start()
      jr.wait_for(function() return #jr.lines(env.dir .. "/done") == 4 end,
                  60, "the queued jobs done")
      assert.equal(0, env:stop())
      local done = jr.lines(env.dir .. "/done")
      table.sort(done)
      assert.are.same({ "1", "2", "4", "5" }, done)
    end)

    if backend == "sqlite" then
      it("refuses a BLOB and a NUL byte, which its CHECKs read past", function()
        env:config("concurrency = 1")
        local out, err, code = env:cli("migrate")
        assert.are.equal(0, code, out .. err)
        assert(try(env, "INSERT INTO jobs (name) VALUES ('mn.a')"))
        for _, sql in ipairs({
          "INSERT INTO jobs (name) VALUES (X'6D6E2062616420')",      -- 'mn bad ' as a BLOB
          "INSERT INTO jobs (name) VALUES (X'6D6E2E61')",            -- 'mn.a' as a BLOB
          "INSERT INTO jobs (name, queue) VALUES ('mn.a', X'64656661756C74')",
          "INSERT INTO jobs (name) VALUES ('mn' || char(0) || ' bad/../x')",
          "INSERT INTO jobs (name, queue) VALUES ('mn.a', 'q' || char(0) || '$')",
          "UPDATE jobs SET name = 'mn' || char(0) || '$$'",
          "UPDATE jobs SET queue = X'71'",
        }) do
          local ok, msg = try(env, sql)
          assert.is_false(ok, sql)
          assert.truthy(msg:find("jobs_names_ok", 1, true), msg)
        end
        assert.are.same({ { name = "mn.a", queue = "default" } },
          env:query("SELECT name, queue FROM jobs"))
        -- the library's own pushes run without the schema's triggers (they
        -- keep the rules themselves): still so with these two
        local q = jr.client(env)
        assert(q:push("mn.a", { n = 1 }))
        q:close()
        env:script("mn.a", "return function() end")
        env:start()
        jr.wait_for(function() return env:count() == 0 end, 60, "both done")
        assert.equal(0, env:stop())
      end)
    end

    if backend == "postgres" then
      it("refuses a bad name whatever the session's search_path holds", function()
        env:config("concurrency = 1")
        local out, err, code = env:cli("migrate")
        assert.are.equal(0, code, out .. err)
        -- a session's own ~ and !~ ahead of pg_catalog's (the CHECK's
        -- operator was fixed when it was made; the trigger's must be too)
        local evil = env.schema .. "_evil"
        env:exec(([[CREATE SCHEMA %s;
          CREATE FUNCTION %s.yes(text, text) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
          CREATE FUNCTION %s.no(text, text) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT false';
          CREATE OPERATOR %s.~ (leftarg = text, rightarg = text, function = %s.yes);
          CREATE OPERATOR %s.!~ (leftarg = text, rightarg = text, function = %s.no);]]):format(
          evil, evil, evil, evil, evil, evil, evil))
        local path = ("SET search_path TO %s, pg_catalog, %s; "):format(evil, env.schema)
        refused(env, "name", try(env, path .. "INSERT INTO jobs (name) VALUES ('mn bad')"))
        refused(env, "queue", try(env, path .. "INSERT INTO jobs (name, queue) VALUES ('mn.a', 'q 1')"))
        assert(try(env, path .. "INSERT INTO jobs (name) VALUES ('mn.a')"))
        refused(env, "name", try(env, path .. "UPDATE jobs SET name = 'mn/a'"))
        assert.are.equal(1, count(env))
        env:exec("DROP SCHEMA " .. evil .. " CASCADE")
      end)

      it("gives the bad value with its control bytes escaped", function()
        env:config("concurrency = 1")
        local out, err, code = env:cli("migrate")
        assert.are.equal(0, code, out .. err)
        local ok, msg = try(env, "INSERT INTO jobs (name) VALUES ('x' || chr(27) || '[31mRED' || chr(10) || 'y')")
        refused(env, "name", ok, msg)
        assert.falsy(msg:find("\27", 1, true), msg)
        assert.truthy(msg:find('"x\\u001b[31mRED\\ny"', 1, true), msg)
      end)
    end
  end)
end
