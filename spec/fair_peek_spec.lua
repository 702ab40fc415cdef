-- fair_peek_spec.lua - a fair queue's small claim while the runner's
-- local queue is full (master/fairq.c, claimq.c) comes with another's
-- push, not with each job's end, on each backend: a drain of one key's
-- 0.5 ms jobs makes a few claims of hundreds, not a fair claim every few
-- jobs (each one a walk of the keys and a write of the passes, a cycle
-- a push's job then waited behind). The claims are counted by a trigger
-- on the clock of fair_clocks, which each fair claim that starts jobs
-- moves to the highest start tag it took; no timings.
local jr = require "jr"

local WORKER = [[
  local now = require("jobrunner").now
  return function()
    local t = now() + 0.0005
    while now() < t do end
  end]]

local N = 1000

local function count_claims(env)
  if env.backend == "postgres" then
    local s = env.schema
    env:exec(([[CREATE TABLE %s.claims (n int NOT NULL);
      INSERT INTO %s.claims VALUES (0);
      CREATE FUNCTION %s.count_claim() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN UPDATE %s.claims SET n = n + 1; RETURN NULL; END $$;
      CREATE TRIGGER count_claim AFTER UPDATE OF clock ON %s.fair_clocks
        FOR EACH ROW EXECUTE FUNCTION %s.count_claim();]]):format(s, s, s, s, s, s))
  else
    env:exec([[CREATE TABLE claims (n INTEGER NOT NULL);
      INSERT INTO claims VALUES (0);
      CREATE TRIGGER count_claim AFTER UPDATE OF clock ON fair_clocks
        BEGIN UPDATE claims SET n = n + 1; END;]])
  end
end

-- The claims that start jobs of fair queue fq: on SQLite as above (each
-- moves the clock, an UPDATE); on PostgreSQL a claim that finds the
-- clock at its tags writes nothing there (a drain over as many keys as
-- jobs: all of one tag), so each statement that takes queued jobs of fq
-- to running counts one.
local function count_takes(env)
  if env.backend ~= "postgres" then return count_claims(env) end
  local s = env.schema
  env:exec(([[CREATE TABLE %s.claims (n int NOT NULL);
    INSERT INTO %s.claims VALUES (0);
    CREATE FUNCTION %s.count_take() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN
        IF EXISTS (SELECT 1 FROM o JOIN n USING (id) WHERE o.state = 'queued'
                   AND n.state = 'running' AND n.queue = 'fq') THEN
          UPDATE %s.claims SET n = n + 1;
        END IF;
        RETURN NULL;
      END $$;
    CREATE TRIGGER count_take AFTER UPDATE ON %s.jobs
      REFERENCING OLD TABLE AS o NEW TABLE AS n
      FOR EACH STATEMENT EXECUTE FUNCTION %s.count_take();]]):format(s, s, s, s, s, s))
end

-- The fewest claims counted (count: count_claims or count_takes) in
-- up to three drains of N jobs of fair queue fq, the payload of job i
-- payload(i); a drain with fewer than N / 20 ends the tries. A loaded
-- machine adds small claims of its own, so the fewest is the figure: the
-- regressions these guard against make every drain's many.
local function fewest_claims(env, count, payload)
  env:config([[concurrency = 2,
    limits = { ["queue:fq"] = { fair = { key = "payload.t" } } }]])
  env:script("fair.p", WORKER)
  local _, err, code = env:cli("migrate")
  assert.are.equal(0, code, err)
  count(env)
  local fewest
  for _ = 1, 3 do
    env:exec("UPDATE claims SET n = 0")
    local q = jr.client(env)
    local jobs = {}
    for i = 1, N do jobs[i] = { "fair.p", payload(i), { queue = "fq" } } end
    assert(q:push_many(jobs))
    q:close()
    env:start()
    jr.wait_for(function()
      return env:query("SELECT count(*) AS n FROM jobs WHERE queue = 'fq'")[1].n == 0
    end, 120, "the drain")
    env:stop()
    local claims = env:query("SELECT n FROM claims")[1].n
    assert.is_true(claims > 0, "no fair claim counted")
    fewest = math.min(fewest or claims, claims)
    if fewest < N / 20 then break end
  end
  return fewest
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " fair queue's small claim:", function()
    local env = jr.test_env(backend)

    it("comes with a push, not with each end of a job claimed ahead", function()
      -- A drain's claims: a few of hundreds (the local queue), 3 to 26
      -- seen; a small claim after each job's end made 62 on a quiet
      -- machine (57 and 81 seen in CI at loads 7 and 11 with the fix)
      local fewest = fewest_claims(env, count_claims, function(i) return { t = "a", n = i } end)
      assert.is_true(fewest < N / 20, ("%d fair claims for %d jobs, the fewest of three drains"):format(fewest, N))
    end)

    it("is not made while each job queued here is its key's first", function()
      -- a drain over as many keys as jobs: every full claim ends with a
      -- key new here, and a small claim after it would go behind the
      -- local queue as the next claim does (all in round 0); claimed as
      -- a plain queue is, in a few claims of hundreds. The small claims
      -- after each full one made about N / 16 (62 on SQLite, 64 on
      -- PostgreSQL).
      local fewest = fewest_claims(env, count_takes, function(i) return { t = "k" .. i } end)
      assert.is_true(fewest < N / 20, ("%d fair claims for %d jobs over as many keys, the fewest of three drains"):format(fewest, N))
    end)
  end)
end
