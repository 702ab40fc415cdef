-- batch_push_spec.lua - a batch push goes to the database in multi-row
-- statements (SQLite: 32 plain jobs per INSERT). What a batch promised
-- before stays: every job in order with its own fields, ids increasing and
-- never reused, a row the database refuses refuses the whole batch with
-- that row's reason, unique jobs in the middle of plain ones keep their
-- outcomes.
local h = require "jr"
local jr = require "jobrunner"

-- 100 jobs: three full blocks of 32 and 4 rows alone
local N = 100

local function batch(from, n, name_at)
  local items = {}
  for i = 1, n do
    local k = from + i - 1
    items[i] = { name_at and name_at(i) or ("job" .. k % 7), { k = k },
                 { queue = "q" .. k % 3, priority = k % 5 } }
  end
  return items
end

for _, backend in ipairs(h.backends()) do
  describe(backend .. " batch push:", function()
    local env = h.test_env(backend)

    local function open()
      return assert(jr.open(env.url, { schema = env.schema }))
    end

    it("inserts every job of a batch spanning several multi-row statements in order, with its own fields",
      function()
      local c = open()
      local ids = assert(c:push_many(batch(1, N)))
      assert.equal(N, #ids)
      for i = 2, N do assert.is_true(ids[i] > ids[i - 1]) end
      local rows = env:jobs()
      assert.equal(N, #rows)
      for i, r in ipairs(rows) do
        assert.equal(ids[i], r.id)
        assert.equal("job" .. i % 7, r.name)
        assert.equal("q" .. i % 3, r.queue)
        assert.equal(i % 5, r.priority)
        assert.equal("queued", r.state)
        assert.equal(i, require("cjson").decode(r.payload).k)
      end
    end)

    it("never reuses an id, across batches and after the jobs are deleted",
      function()
      local c = open()
      local first = assert(c:push_many(batch(1, N)))
      env:exec("DELETE FROM jobs")
      local second = assert(c:push_many(batch(1, N)))
      assert.is_true(second[1] > first[N])
      for i = 2, N do assert.is_true(second[i] > second[i - 1]) end
      assert.equal(N, env:count())
    end)

    it("refuses the whole batch when the database refuses one row in the middle, with that row's reason",
      function()
      local c = open()      -- makes the tables
      if backend == "postgres" then
        env:exec([[CREATE FUNCTION refuse_one() RETURNS trigger
          LANGUAGE plpgsql AS $$ BEGIN
          IF NEW.name = 'refuseme' THEN
            RAISE EXCEPTION 'refused by the spec';
          END IF; RETURN NEW; END $$;
          CREATE TRIGGER refuse_one BEFORE INSERT ON jobs FOR EACH ROW
          EXECUTE FUNCTION refuse_one()]])
      else
        env:exec([[CREATE TRIGGER refuse_one BEFORE INSERT ON jobs
          WHEN NEW.name = 'refuseme'
          BEGIN SELECT RAISE(ABORT, 'refused by the spec'); END]])
      end
      local ids, err = c:push_many(batch(1, N, function(i)
        return i == 50 and "refuseme" or "plain"
      end))
      assert.is_nil(ids)
      assert.matches("refused by the spec", err, 1, true)
      if backend == "sqlite" then
        assert.matches("job 'refuseme'", err, 1, true)
      end
      assert.equal(0, env:count())
      -- the next batch goes in whole, above every id
      ids = assert(c:push_many(batch(1, N)))
      assert.equal(N, env:count())
      for i = 2, N do assert.is_true(ids[i] > ids[i - 1]) end
    end)

    it("gives each job of a multi-row statement the limit key of its own payload or option",
      function()
      local c = open()
      env:exec("INSERT INTO limit_paths (name, path) VALUES ('keyed', 'acct')")
      local items = {}
      for i = 1, N do
        if i % 10 == 0 then
          items[i] = { "keyed", { acct = "p" .. i }, { key = "o" .. i } }
        elseif i % 3 == 0 then
          items[i] = { "plain", { acct = "p" .. i } }
        else
          items[i] = { "keyed", { acct = "p" .. i } }
        end
      end
      local ids = assert(c:push_many(items))
      local keys = {}
      for _, r in ipairs(env:query("SELECT id, limit_key FROM jobs")) do
        keys[r.id] = r.limit_key
      end
      for i = 1, N do
        local want = i % 10 == 0 and "o" .. i or i % 3 ~= 0 and "p" .. i or nil
        local got = keys[ids[i]]
        if want == nil then
          assert.is_true(got == nil or got == require("cjson").null, "job " .. i)
        else
          assert.equal(want, got, "job " .. i)
        end
      end
    end)

    it("keeps the outcome of unique jobs between plain ones", function()
      local c = open()
      assert(c:push("u", { first = true }, { unique_key = "k1" }))
      local items = batch(1, N)
      items[40] = { "u", { k = 40 }, { unique_key = "k1" } }   -- duplicate
      items[41] = { "u", { k = 41 }, { unique_key = "k2" } }   -- new
      local ids, dups = assert(c:push_many(items))
      assert.equal(N, #ids)
      assert.is_true(dups[40])
      assert.is_false(dups[41])
      assert.is_false(dups[1])
      assert.is_false(dups[N])
      -- the first job, and N - 1 of the batch: the duplicate was not
      assert.equal(N, env:count())
      local r = env:job(ids[41])
      assert.equal("u", r.name)
      assert.equal(41, require("cjson").decode(r.payload).k)
      assert.equal("job" .. 42 % 7, env:job(ids[42]).name)
      for i = 42, N do assert.is_true(ids[i] > ids[i - 1]) end
    end)
  end)
end
