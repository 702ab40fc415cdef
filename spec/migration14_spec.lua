-- migration14_spec.lua - migration 14 (PostgreSQL; SQLite has no SQL
-- functions and needs none): jobrunner.link refuses a cycle (a job after
-- its own child, two jobs each after the other), naming both ids, and a
-- child made dead by a dead parent gets job.parents (the parents that had
-- ended) for when it is retried. A database of schema 13 with a waiting
-- child and a parent whose child dies with it is brought forward by
-- `jobrunner migrate` with every job intact. The schema-13 database is
-- made from the first blocks of backends/postgres/schema.sql.
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
                      parents_left, on_parent_failure)
    VALUES ('m14.a', '{"n": 1}', 'default', 'queued', %s, 0, 1, 0, NULL),
           ('m14.b', '{"n": 2}', 'default', 'waiting', %s, 0, 0, 1, NULL),
           ('m14.a', '{"n": 3}', 'default', 'queued', %s, 0, 1, 0, NULL),
           ('m14.b', '{"n": 4}', 'default', 'waiting', %s, 0, 0, 1, 'dead')
  ]]):format(past, past, past, past))
  env:exec("INSERT INTO job_deps (parent_id, child_id) VALUES (1, 2), (3, 4)")
end

for _, backend in ipairs(jr.backends()) do
  if backend == "postgres" then
  describe(backend .. ": migration 14 (link's cycles, a dead child's parents)", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("upgrades a schema-13 database with its jobs intact; link refuses cycles", function()
      jr.make_schema(env, 13)
      old_jobs(env)
      local before = jr.job_snapshot(env)
      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, jr.job_snapshot(env))
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
end
