-- sqlite_triggers_spec.lua - the library's SQLite connection runs without
-- the schema's own triggers (jobs_run_at_check, jobs_queue_known,
-- jobs_queue_moved: a sub-program for every row, the biggest cost of a
-- batch push) and keeps their rules itself. What this must not change:
-- plain SQL is held to them as before; a push through the library makes its
-- queue known as the trigger did; and any other trigger (yours), or one of
-- ours changed, is run for the library's writes, also when it was made
-- while the library had the database open.
local h = require "jr"
local jr = require "jobrunner"

local function queues(env)
  local t = {}
  for _, r in ipairs(env:query("SELECT name FROM queues ORDER BY name")) do
    t[#t + 1] = r.name
  end
  return t
end

-- A plain-SQL statement that must fail: its error text.
local function refused(env, sql)
  local _, err, code = h.sh(("sqlite3 -cmd '.timeout 10000' %s %s"):format(
    h.quote(env:sqlite_path()), h.quote(sql)))
  assert.are_not.equal(0, code, "not refused: " .. sql)
  return err
end

local function batch(n, queue_of)
  local items = {}
  for i = 1, n do
    items[i] = { "tr.job", { i = i }, { queue = queue_of(i) } }
  end
  return items
end

local sqlite = false
for _, b in ipairs(h.backends()) do sqlite = sqlite or b == "sqlite" end

if sqlite then
  describe("sqlite: the schema's triggers and the library", function()
    local env = h.test_env("sqlite")

    local function open()
      return assert(jr.open(env.url))
    end

    it("a push makes its queue known, one job or a batch, as plain SQL does",
      function()
      local c = open()
      assert(c:push("tr.job", {}, { queue = "one.q" }))
      assert(c:push("tr.job", {}))
      assert(c:push_many(batch(100, function(i)
        return i % 2 == 0 and "even.q" or "odd.q"
      end)))
      env:exec("INSERT INTO jobs (name, queue) VALUES ('tr.sql', 'sql.q')")
      assert.are.same({ "default", "even.q", "odd.q", "one.q", "sql.q" },
        queues(env))
      -- a queue deleted from the table is known again at the next push
      env:exec("DELETE FROM queues WHERE name = 'odd.q'")
      assert(c:push_many(batch(40, function() return "odd.q" end)))
      assert.are.same({ "default", "even.q", "odd.q", "one.q", "sql.q" },
        queues(env))
      assert.are.equal(143, env:count())
      c:close()
    end)

    it("plain SQL is still refused a bad run_at, with the trigger's message",
      function()
      local c = open()
      assert(c:push_many(batch(64, function() return "default" end)))
      for _, v in ipairs({ "'soon'", "1e999", "-1e300", "x'00'" }) do
        local err = refused(env,
          "INSERT INTO jobs (name, run_at) VALUES ('tr.bad', " .. v .. ")")
        assert.matches("run_at must be finite epoch seconds", err, 1, true)
      end
      assert(c:push("tr.job", {}))
      assert.are.equal(65, env:count())
      c:close()
    end)

    it("runs a trigger of yours for the library's writes, also one made "
       .. "while it has the database open", function()
      local c = open()
      assert(c:push_many(batch(32, function() return "default" end)))
      env:exec([[
        CREATE TABLE audit (what TEXT NOT NULL, job INTEGER);
        CREATE TRIGGER audit_insert AFTER INSERT ON jobs
        BEGIN INSERT INTO audit VALUES ('insert', NEW.id); END;
        CREATE TRIGGER audit_pause AFTER UPDATE OF paused ON queues
        BEGIN INSERT INTO audit VALUES ('pause ' || NEW.name, NULL); END;]])
      -- the first write after it: a pause (its own transaction)
      assert(c:pause("default"))
      local ids = assert(c:push_many(batch(100, function() return "default" end)))
      local one = assert(c:push("tr.job", {}, { queue = "new.q" }))
      local rows = env:query("SELECT what, job FROM audit ORDER BY rowid")
      assert.are.equal(102, #rows)
      assert.are.equal("pause default", rows[1].what)
      for i = 1, 100 do
        assert.are.same({ what = "insert", job = ids[i] }, rows[i + 1])
      end
      assert.are.same({ what = "insert", job = one }, rows[102])
      -- ours still ran with it: the new queue is known
      assert.are.same({ "default", "new.q" }, queues(env))
      -- dropped again: the library's writes go without it
      env:exec("DROP TRIGGER audit_insert; DROP TRIGGER audit_pause")
      assert(c:push_many(batch(100, function() return "later.q" end)))
      assert(c:resume("default"))
      assert.are.equal(102, env:query("SELECT count(*) AS n FROM audit")[1].n)
      assert.are.same({ "default", "later.q", "new.q" }, queues(env))
      c:close()
    end)

    it("runs one of jobrunner's triggers whose rule was changed", function()
      local c = open()
      assert(c:push("tr.job", {}, { run_at = 4200000000 }))
      env:exec([[
        DROP TRIGGER jobs_run_at_check;
        CREATE TRIGGER jobs_run_at_check BEFORE INSERT ON jobs
        WHEN NEW.run_at > 4102444800
        BEGIN SELECT RAISE(ABORT, 'not after 2100'); END;]])
      local id, err = c:push("tr.job", {}, { run_at = 4200000000 })
      assert.is_nil(id)
      assert.matches("not after 2100", err, 1, true)
      local ids
      ids, err = c:push_many(batch(64, function(i)
        return i == 40 and "late.q" or "default"
      end))
      assert(ids, err)
      local items = batch(64, function() return "default" end)
      items[40][3].run_at = 4200000000
      ids, err = c:push_many(items)
      assert.is_nil(ids)
      assert.matches("not after 2100", err, 1, true)
      assert.are.equal(65, env:count())
      c:close()
    end)

    it("a runner runs a trigger of yours made while it runs", function()
      env:script("tr.job", "return function() end")
      env:start()
      local first = env:push("tr.job")
      h.wait_for(function() return env:job(first) == nil end, 20,
        "the first job done")
      -- (the runner may hold the write lock: wait for it)
      env:exec([[
        PRAGMA busy_timeout = 10000;
        CREATE TABLE claimed (job INTEGER);
        CREATE TRIGGER claimed AFTER UPDATE OF state ON jobs
        WHEN NEW.state = 'running'
        BEGIN INSERT INTO claimed VALUES (NEW.id); END;]])
      local second = env:push("tr.job")
      h.wait_for(function() return env:job(second) == nil end, 20,
        "the second job done")
      assert.are.same({ { job = second } },
        env:query("SELECT job FROM claimed"))
      assert.are.equal(0, env:stop())
    end)
  end)
end
