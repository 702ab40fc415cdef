-- migration_user_objects_spec.lua - what a team made on and around the
-- jobs table survives every migration from schema 1, on both backends: a
-- view that reads jobs, an index and a trigger on it, and a trigger on
-- their own table that pushes jobs. SQLite rebuilds jobs twice (migrations
-- 3 and 7): the rename refused to run while a view read jobs ("error in
-- view ...: no such table: main.jobs", so the runner did not start), and
-- without a view the user's indexes and triggers on jobs went with the
-- old table, silently.
local jr = require "jr"

local USER_SQL = {
  sqlite = [[
    CREATE VIEW my_ready AS SELECT id, name, queue FROM jobs
      WHERE state = 'queued';
    CREATE INDEX my_by_name ON jobs (name, created_at);
    CREATE TABLE my_audit (job INTEGER, what TEXT);
    CREATE TRIGGER my_pushed AFTER INSERT ON jobs
      BEGIN INSERT INTO my_audit VALUES (NEW.id, 'pushed'); END;
    CREATE TRIGGER my_again AFTER INSERT ON my_audit WHEN NEW.what = 'again'
      BEGIN INSERT INTO jobs (name) VALUES ('mu.ok'); END;
  ]],
  postgres = [[
    CREATE VIEW my_ready AS SELECT id, name, queue FROM jobs
      WHERE state = 'queued';
    CREATE INDEX my_by_name ON jobs (name, created_at);
    CREATE TABLE my_audit (job bigint, what text);
    CREATE FUNCTION my_audit_fn() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO {{schema}}.my_audit VALUES (NEW.id, 'pushed');
        RETURN NEW;
      END $$;
    CREATE TRIGGER my_pushed AFTER INSERT ON jobs
      FOR EACH ROW EXECUTE FUNCTION my_audit_fn();
    CREATE FUNCTION my_again_fn() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO {{schema}}.jobs (name) VALUES ('mu.ok');
        RETURN NEW;
      END $$;
    CREATE TRIGGER my_again AFTER INSERT ON my_audit
      FOR EACH ROW WHEN (NEW.what = 'again') EXECUTE FUNCTION my_again_fn();
  ]],
}

-- The user's objects by name and definition.
local OBJECTS = {
  sqlite = "SELECT type, name, sql FROM sqlite_master " ..
           "WHERE name LIKE 'my!_%' ESCAPE '!' ORDER BY name",
  postgres = "SELECT c.relname AS name, c.relkind AS kind FROM pg_class c " ..
             "JOIN pg_namespace n ON n.oid = c.relnamespace " ..
             "WHERE n.nspname = current_schema() AND c.relname LIKE 'my!_%' ESCAPE '!' " ..
             "UNION ALL SELECT t.tgname, 'trigger' FROM pg_trigger t " ..
             "JOIN pg_class c ON c.oid = t.tgrelid " ..
             "JOIN pg_namespace n ON n.oid = c.relnamespace " ..
             "WHERE n.nspname = current_schema() AND t.tgname LIKE 'my!_%' ESCAPE '!' " ..
             "ORDER BY 1",
}

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": migrations keep a user's objects on jobs", function()
    local env
    before_each(function() env = jr.env(backend) end)
    after_each(function() env:cleanup() end)

    it("a view, an index and triggers made on schema 1 survive migrate", function()
      jr.make_schema(env, 1)
      env:exec("INSERT INTO jobs (name) VALUES ('mu.ok'); " ..
               "INSERT INTO jobs (name, queue) VALUES ('mu.ok', 'mail')")
      env:exec((USER_SQL[backend]:gsub("{{schema}}", function()
        return '"' .. (env.schema or "") .. '"'
      end)))
      local before = env:query(OBJECTS[backend])
      assert.equal(5, #before)
      local ready = env:query("SELECT * FROM my_ready ORDER BY id")
      assert.equal(2, #ready)

      local out, err, code = env:cli("migrate")
      assert.are.equal(0, code, out .. err)
      assert.are.same(before, env:query(OBJECTS[backend]))
      assert.are.same(ready, env:query("SELECT * FROM my_ready ORDER BY id"))
      if backend == "sqlite" then
        local last = 0          -- the schema file's last migration
        for n in jr.read_file(jr.schema_file("sqlite")):gmatch("\n%-%- migration (%d+)\n") do
          last = math.max(last, tonumber(n))
        end
        assert.equal(last, env:query("PRAGMA user_version")[1].user_version)
        assert.equal("ok", env:query("PRAGMA integrity_check")[1].integrity_check)
        -- the index holds every row (INDEXED BY fails if it cannot serve)
        assert.equal(2, #env:query(
          "SELECT id FROM jobs INDEXED BY my_by_name WHERE name >= ''"))
      end

      -- the trigger on jobs fires on a push, and the user's table's
      -- trigger still reaches jobs
      local id = env:push("mu.ok", "{}")
      assert.equal(1, #env:query("SELECT 1 FROM my_audit WHERE job = " .. id))
      env:exec("INSERT INTO my_audit VALUES (0, 'again')")
      assert.equal(4, #env:query("SELECT 1 FROM my_ready"))
      -- and a runner works the jobs through all of it
      env:script("mu.ok", "return function() end")
      env:start()
      jr.wait_for(function() return #env:query("SELECT 1 FROM my_ready") == 0 end,
        20, "jobs run")
      assert.equal(0, env:stop())
    end)
  end)
end
