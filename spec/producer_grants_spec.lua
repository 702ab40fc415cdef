-- producer_grants_spec.lua - PostgreSQL: a producer's role with exactly
-- the grants docs/storage.md lists (USAGE on the schema; SELECT, INSERT,
-- UPDATE, DELETE on its tables) pushes with jobrunner.push, a plain
-- INSERT and `jobrunner push`, replaces a sequence's job, cancels, pauses
-- and resumes; with USAGE alone it is refused (the functions run with the
-- caller's privileges).
local jr = require "jr"

local function role_url(role)
  return (jr.pg_url:gsub("user=[^&]*", "user=" .. role))
end

local function as_role(role, sql)
  return jr.sh(("psql -X -q -A -t -v ON_ERROR_STOP=1 %s -c %s")
    :format(jr.quote(role_url(role)), jr.quote(sql)))
end

if jr.pg_url and jr.pg_url:find("user=", 1, true) then
  describe("postgres: a producer's role", function()
    local env, role
    before_each(function()
      env = jr.env("postgres")
      role = ("prod_%d"):format(math.random(1, 1e9))
      env:cli("migrate")
      jr.psql(("CREATE ROLE %s LOGIN; GRANT USAGE ON SCHEMA %s TO %s")
        :format(role, env.schema, role))
    end)
    after_each(function()
      jr.psql(("DROP OWNED BY %s; DROP ROLE %s"):format(role, role))
      env:cleanup()
    end)

    it("with the documented grants pushes, replaces, cancels and pauses", function()
      local s = env.schema
      jr.psql(("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %s TO %s")
        :format(s, role))
      local out, err, code = as_role(role, ("SELECT %s.push('x', '{}')"):format(s))
      assert.equal(0, code, err)
      local id = out:match("%d+")
      _, err, code = as_role(role, ("INSERT INTO %s.jobs (name, payload) VALUES ('y', '{}')"):format(s))
      assert.equal(0, code, err)
      local cfg = env.dir .. "/prod.lua"
      jr.write_file(cfg, ('return { backend = %q, schema = %q, scripts = %q }')
        :format(role_url(role), s, env.dir .. "/scripts"))
      out, err, code = jr.sh(("%s -c %s push z '{}' --sequence k1"):format(
        jr.quote(jr.bin), jr.quote(cfg)))
      assert.equal(0, code, err)
      out, err, code = jr.sh(("%s -c %s push z '{}' --sequence k1 --on-conflict replace"):format(
        jr.quote(jr.bin), jr.quote(cfg)))
      assert.equal(0, code, err)
      assert.matches("replaced", out)
      out, err, code = as_role(role, ("SELECT %s.cancel(%s), %s.pause('q9'), %s.resume('q9')")
        :format(s, id, s, s))
      assert.equal(0, code, err)
      assert.matches("^cancelled", out)
    end)

    it("with USAGE alone is refused", function()
      local _, err, code = as_role(role, ("SELECT %s.push('x', '{}')"):format(env.schema))
      assert.is_not.equal(0, code)
      assert.matches("permission denied", err)
    end)
  end)
end
