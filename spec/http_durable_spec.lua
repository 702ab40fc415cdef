-- http_durable_spec.lua - pushes over HTTP (POST /api/jobs, /api/flows)
-- run on the runner's own connection, whose claims and results commit
-- without waiting for the disk (SQLite synchronous = NORMAL, PostgreSQL
-- synchronous_commit = off); they are acknowledged, so each commits
-- durably first, as a CLI push does. A trigger records the setting in
-- force in each push's own transaction; a handler's follow-up push (the
-- runner's own path) stays as it was. On both backends.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

-- The trigger that writes each job's name and the setting in force.
local function record_setting(env)
  if env.backend == "postgres" then
    env:exec(([[
      CREATE TABLE sync_seen (name text, v text);
      CREATE FUNCTION sync_seen_f() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO %s.sync_seen VALUES (NEW.name,
          current_setting('synchronous_commit'));
        RETURN NEW;
      END $$;
      CREATE TRIGGER sync_seen_t AFTER INSERT ON jobs FOR EACH ROW
        EXECUTE FUNCTION sync_seen_f();]]):format(env.schema))
  else
    env:exec([[
      CREATE TABLE sync_seen (name TEXT, v TEXT);
      CREATE TRIGGER sync_seen_t AFTER INSERT ON jobs BEGIN
        INSERT INTO sync_seen SELECT NEW.name, synchronous
          FROM pragma_synchronous();
      END;]])
  end
end

-- The settings recorded for name's pushes, as a set.
local function seen(env, name)
  local t = {}
  for _, r in ipairs(env:query(("SELECT v FROM sync_seen WHERE name = '%s'")
      :format(name))) do
    t[tostring(r.v)] = true
  end
  return t
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " http pushes:", function()
    local env = jr.test_env(backend)

    it("commit durably on the runner's connection, its own writes not",
      function()
      local durable = backend == "postgres" and "on" or "2"   -- FULL
      local fast = backend == "postgres" and "off" or "1"     -- NORMAL
      env:script("parent", [[
        local jobrunner = require "jobrunner"
        return function() jobrunner.push("child", {}) end]])
      local _, err, code = env:cli("migrate")
      assert.equal(0, code, err)
      record_setting(env)
      local base = H.start(env)
      H.json(base .. "/api/jobs", 201, { body = '{"name":"one"}' })
      H.json(base .. "/api/jobs", 201,
        { body = '[{"name":"many"},{"name":"many"}]' })
      H.json(base .. "/api/flows", 201, { body = cjson.encode({ jobs = {
        { ref = "a", name = "flow" }, { ref = "b", name = "flow",
          after = { "a" } } } }) })
      env:push("cli")
      local parent = env:push("parent")
      jr.wait_for(function() return #env:query(
        "SELECT 1 AS x FROM sync_seen WHERE name = 'child'") == 1 end,
        30, "the handler's follow-up push")
      assert.same({ [durable] = true }, seen(env, "one"))
      assert.same({ [durable] = true }, seen(env, "many"))
      assert.same({ [durable] = true }, seen(env, "flow"))
      assert.same({ [durable] = true }, seen(env, "cli"))
      -- the runner's own writes keep their fast commits
      assert.same({ [fast] = true }, seen(env, "child"))
      assert.is_number(parent)
      assert.equal(0, env:stop())
    end)
  end)
end
