-- migration9_spec.lua - PostgreSQL's migration 9 replaces the SQL function
-- push_unique (a unique_for window is taken again when the holder finished
-- while the push waited on it): a database of schema 8 is brought forward
-- by `jobrunner migrate` with its jobs and windows intact, and its windows
-- still hold. SQLite has no migration 9 (its pushes are serialized). The
-- schema-8 database is made from the first blocks of backends/postgres/schema.sql.
local jr = require "jr"
local cjson = require "cjson"

if not jr.pg_url or (os.getenv("JR_BACKENDS") or "postgres"):find("postgres") == nil then
  return
end

local function snapshot(env)
  local t = {}
  for _, r in ipairs(env:jobs()) do
    t[r.id] = { name = r.name, payload = cjson.decode(r.payload), state = r.state }
  end
  return t
end

describe("postgres: migration 9 (push_unique keeps its window)", function()
  local env = jr.test_env("postgres")

  it("upgrades a schema-8 database with its jobs and windows intact", function()
    jr.make_schema(env, 8)
    env:exec([[
      INSERT INTO jobs (name, payload, state, unique_key)
      VALUES ('m9.a', '{"n": 1}', 'queued', 'k'), ('m9.a', '{"n": 2}', 'dead', NULL);
      INSERT INTO unique_keys (name, unique_key, job_id, held_until)
      VALUES ('m9.w', 'daily', 77, now() + interval '1 hour')]])
    local before = snapshot(env)
    local out, err, code = env:cli("migrate")
    assert.equal(0, code, out .. err)
    assert.same(before, snapshot(env))
    assert.equal(1, env:query("SELECT count(*) AS n FROM migrations" ..
      " WHERE version = 9")[1].n)
    out = env:cli("push", "m9.w", "--unique-key", "daily")
    assert.equal("77 duplicate\n", out)
    out = env:cli("push", "m9.a", "--unique-key", "k")
    assert.equal("1 duplicate\n", out)
    out = env:cli("push", "m9.b", "--unique-key", "k", "--unique-for", "1h")
    local id = assert(tonumber(out:match("^(%d+) new\n$")), out)
    env:exec("DELETE FROM jobs WHERE id = " .. id)
    assert.equal(id .. " duplicate\n", (env:cli("push", "m9.b", "--unique-key", "k")))
  end)
end)
