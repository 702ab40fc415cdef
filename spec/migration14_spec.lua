-- migration14_spec.lua - migration 14. On both backends: the jobs with a
-- unique key are indexed by it (jobs_key), which a dead job's retry reads
-- to find who holds its key. On PostgreSQL (SQLite has no SQL functions
-- and needs none): jobrunner.link refuses a cycle (a job after its own
-- child, two jobs each after the other), naming both ids, and a child made
-- dead by a dead parent gets job.parents (the parents that had ended) for
-- when it is retried. A database of schema 13 with a waiting child, a
-- parent whose child dies with it and dead jobs with keys is brought
-- forward by `jobrunner migrate` with every job intact. The schema-13
-- database is made from the first blocks of backends/*/schema.sql.
local jr = require "jr"
local cjson = require "cjson"

-- Runs sql in env's schema; returns psql's output, error text and code.
local function psql(env, sql)
  return jr.sh(("psql -X -q -A -t -v ON_ERROR_STOP=1 %s -c %s"):format(
    jr.quote(jr.pg_url), jr.quote(("SET search_path TO %s; %s"):format(env.schema, sql))))
end

local function old_jobs(env)
  local past = jr.past_later(env)
  env:exec(([[
    INSERT INTO jobs (name, payload, queue, state, run_at, attempts, flow,
                      parents_left, on_parent_failure, unique_key, died_at)
    VALUES ('m14.a', '{"n": 1}', 'default', 'queued', %s, 0, 1, 0, NULL, NULL, NULL),
           ('m14.b', '{"n": 2}', 'default', 'waiting', %s, 0, 0, 1, NULL, NULL, NULL),
           ('m14.a', '{"n": 3}', 'default', 'queued', %s, 0, 1, 0, NULL, NULL, NULL),
           ('m14.b', '{"n": 4}', 'default', 'waiting', %s, 0, 0, 1, 'dead', NULL, NULL),
           ('m14.k', '{"n": 5}', 'default', 'dead', %s, 4, 0, 0, NULL, 'k1', %s),
           ('m14.k', '{"n": 6}', 'default', 'dead', %s, 4, 0, 0, NULL, 'k1', %s),
           ('m14.k', '{"n": 7}', 'default', 'dead', %s, 4, 0, 0, NULL, 'k2', %s),
           ('m14.k', '{"n": 8}', 'default', 'queued', %s, 0, 0, 0, NULL, 'k2', NULL)
  ]]):format(past, past, past, past, past, past, past, past, past, past, past))
  env:exec("INSERT INTO job_deps (parent_id, child_id) VALUES (1, 2), (3, 4)")
end

local function has_index(env)
  local sql = env.backend == "postgres"
    and "SELECT indexname AS name FROM pg_indexes WHERE tablename = 'jobs'" ..
        " AND schemaname = current_schema() AND indexname = 'jobs_key'"
    or "SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'jobs_key'"
  return #env:query(sql) == 1
end

local function key_of(env, id)
  local k = env:query("SELECT unique_key FROM jobs WHERE id = " .. id)[1].unique_key
  return k ~= cjson.null and k or nil
end

for _, backend in ipairs(jr.backends()) do
  local pg = backend == "postgres"
  describe(backend .. ": migration 14 (jobs_key; link's cycles, a dead child's parents)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-13 database with its jobs intact; retries, link refuses cycles", function()
      jr.make_schema(env, 13)
      old_jobs(env)
      assert.is_false(has_index(env))
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
      assert.is_true(has_index(env))
      -- the retried dead jobs: 6 keeps k1 (the newest dead), 5 and 7 run
      -- as plain jobs (a newer dead one, a queued one hold their keys)
      out, err, code = env:cli("dead", "retry", "--all")
      assert.are.equal(0, code, out .. err)
      for id = 5, 7 do assert.are.equal("queued", env:job(id).state) end
      assert.is_nil(key_of(env, 5))
      assert.are.equal("k1", key_of(env, 6))
      assert.is_nil(key_of(env, 7))
      assert.are.equal("k2", key_of(env, 8))
      if not pg then return end
      before = jr.job_snapshot(env)
      -- a queued job after its own child
      out, err, code = psql(env, "SELECT link(1, ARRAY[2])")
      assert.are_not.equal(0, code, out)
      assert.truthy(err:find("jobrunner.link: job 1 cannot wait for job 2, which waits for it", 1, true), err)
      assert.are.same(before, jr.job_snapshot(env))
      -- two jobs each after the other, the second link refused
      local a = tonumber(psql(env, "SELECT push('m14.a')"):match("%d+"))
      local b = tonumber(psql(env, "SELECT push('m14.a')"):match("%d+"))
      out, err, code = psql(env, ("SELECT link(%d, ARRAY[%d])"):format(a, b))
      assert.are.equal(0, code, err)
      out, err, code = psql(env, ("SELECT link(%d, ARRAY[%d])"):format(b, a))
      assert.are_not.equal(0, code, out)
      assert.truthy(err:find(("job %d cannot wait for job %d"):format(b, a), 1, true), err)
      assert.are.equal("queued", env:job(b).state)
      assert.are.equal("waiting", env:job(a).state)
      -- further down: a third job after the second is refused as the
      -- first's parent
      local c = tonumber(psql(env, "SELECT push('m14.a')"):match("%d+"))
      out, err, code = psql(env, ("SELECT link(%d, ARRAY[%d])"):format(c, a))
      assert.are.equal(0, code, err)
      out, err, code = psql(env, ("SELECT link(%d, ARRAY[%d])"):format(b, c))
      assert.are_not.equal(0, code, out)
      assert.truthy(err:find(("job %d cannot wait for job %d"):format(b, c), 1, true), err)
      -- a parent ended dead by plain SQL kills its child, which gets
      -- job.parents
      env:exec("UPDATE jobs SET state = 'dead', finished_at = now() WHERE id = 3")
      local child = env:job(4)
      assert.are.equal("dead", child.state)
      assert.are.equal("parent 3 ended dead", child.last_error)
      local parents = env:query("SELECT parents FROM jobs WHERE id = 4")[1].parents
      assert.are.same({ ["3"] = { state = "dead" } }, parents)
      out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
    end)
  end)
end
