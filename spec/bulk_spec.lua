-- bulk_spec.lua - bulk actions on many jobs work in bounded transactions
-- (JR_BULK_ROWS jobs each), on each backend: 20,000 dead jobs retried by
-- POST /api/bulk/retry, by POST /api/dead/retry {"all": true} and by
-- `dead retry --all` while pushes from the command line go on (none fails
-- with "database is locked"), the request answered and every job
-- retried; purged likewise; a runner sent SIGTERM during a bulk retry
-- stops within its shutdown timeout with every job dead or retried.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

local N = 20000

-- N jobs named bulk.dead (no handler takes them), dead (or in state),
-- half with a unique key, made by one SQL statement.
local function dead_jobs(env, state)
  state = state or "dead"
  local out, err, code = env:cli("migrate")
  assert.equal(0, code, out .. err)
  if env.backend == "postgres" then
    env:exec(([[
      INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                        last_error, died_at, finished_at, unique_key)
      SELECT 'bulk.dead', '{}', 'default', '%s', now(), 4, 'gave up',
             now(), now(), CASE WHEN i %% 2 = 0 THEN 'k' || i END
      FROM generate_series(1, %d) i]]):format(state, N))
  else
    env:exec(([[
      WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c
                              WHERE i < %d)
      INSERT INTO jobs (name, payload, queue, state, run_at, attempts,
                        last_error, died_at, finished_at, unique_key)
      SELECT 'bulk.dead', '{}', 'default', '%s', t, 4, 'gave up', t, t,
             CASE WHEN i %% 2 = 0 THEN 'k' || i END
      FROM c, (SELECT (julianday('now') - 2440587.5) * 86400.0 AS t)]]):format(N, state))
  end
  assert.equal(N, env:count(state))
end

-- Starts `cmd` in the background; returns the file its stdout goes to and
-- the file that holds its exit status once it ended.
local function background(env, name, cmd)
  local out, status = env.dir .. "/" .. name .. ".out", env.dir .. "/" .. name .. ".status"
  os.execute(("sh -c %s >/dev/null 2>&1 &"):format(jr.quote(
    ("%s > %s 2>&1; echo $? > %s"):format(cmd, jr.quote(out), jr.quote(status)))))
  return out, status
end

local function ended(status)
  local s = jr.read_file(status)
  return s and s:match("%d+") and tonumber(s:match("%d+"))
end

-- Pushes plain jobs from the command line until status says the
-- background command ended; each push must succeed. Returns how many.
local function push_meanwhile(env, status)
  local n = 0
  local deadline = jr.now() + 300
  while not ended(status) do
    assert(jr.now() < deadline, "the bulk action ended within 300s")
    local out, err, code = env:cli("push", "bulk.pushed")
    assert.equal(0, code, "a push during the bulk action: " .. out .. err)
    n = n + 1
  end
  return n
end

local function curl_post(url, body)
  return ("curl -s -S -m 280 -X POST -H %s -H %s %s %s"):format(
    jr.quote("Authorization: Bearer " .. H.TOKEN),
    jr.quote("Content-Type: application/json"),
    body and ("--data-binary " .. jr.quote(body)) or "", jr.quote(url))
end

-- Makes every bulk.dead job dead again, as it was.
local function kill_again(env)
  local past = jr.past_later(env)
  env:exec(("UPDATE jobs SET state = 'dead', attempts = 4, died_at = %s," ..
            " finished_at = %s WHERE name = 'bulk.dead'"):format(past, past))
end

local function count(env, where)
  return env:query("SELECT count(*) AS n FROM jobs WHERE " .. where)[1].n
end

-- Every bulk.dead job requeued: attempts 0, and each key held once.
local function all_retried(env)
  assert.equal(N, count(env, "name = 'bulk.dead' AND state = 'queued' AND attempts = 0"))
  assert.equal(N / 2, count(env, "name = 'bulk.dead' AND unique_key IS NOT NULL"))
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": bulk actions on 20,000 jobs", function()
    local env = jr.test_env(backend)

    it("POST /api/bulk/retry lets pushes in, answers, retries all", function()
      dead_jobs(env)
      local base = H.start(env)
      local out, status = background(env, "bulk", curl_post(base ..
        "/api/bulk/retry?name=bulk.dead"))
      local pushes = push_meanwhile(env, status)
      assert.equal(0, ended(status), jr.read_file(out))
      assert.same({ matched = N, retried = N }, cjson.decode(jr.read_file(out)))
      all_retried(env)
      assert.equal(pushes, count(env, "name = 'bulk.pushed'"))
      assert.equal(0, env:stop())
    end)

    it("POST /api/bulk/cancel lets pushes in, answers, cancels all", function()
      dead_jobs(env, "queued")
      local base = H.start(env)
      local out, status = background(env, "bulk", curl_post(base ..
        "/api/bulk/cancel?name=bulk.dead"))
      local pushes = push_meanwhile(env, status)
      assert.equal(0, ended(status), jr.read_file(out))
      assert.same({ matched = N, cancelled = N, cancel_requested = 0,
                    finished = 0, not_found = 0 }, cjson.decode(jr.read_file(out)))
      assert.equal(N, count(env, "name = 'bulk.dead' AND state = 'cancelled'"))
      assert.equal(pushes, count(env, "name = 'bulk.pushed'"))
      assert.equal(0, env:stop())
    end)

    it("POST /api/dead/retry and purge {all}, and the CLI's, let pushes in", function()
      dead_jobs(env)
      local base = H.start(env)
      local out, status = background(env, "all", curl_post(base .. "/api/dead/retry",
        '{"all": true}'))
      local pushes = push_meanwhile(env, status)
      assert.equal(0, ended(status), jr.read_file(out))
      assert.same({ retried = N }, cjson.decode(jr.read_file(out)))
      all_retried(env)
      assert.equal(0, env:stop())
      -- the command line's, without a runner: dead again, retried, purged
      kill_again(env)
      out, status = background(env, "cli", ("%s -c %s dead retry --all"):format(
        jr.quote(jr.bin), jr.quote(env.config_file)))
      pushes = pushes + push_meanwhile(env, status)
      assert.equal(0, ended(status), jr.read_file(out))
      assert.truthy(jr.read_file(out):find(tostring(N), 1, true), jr.read_file(out))
      all_retried(env)
      kill_again(env)
      out, status = background(env, "purge", ("%s -c %s dead purge"):format(
        jr.quote(jr.bin), jr.quote(env.config_file)))
      pushes = pushes + push_meanwhile(env, status)
      assert.equal(0, ended(status), jr.read_file(out))
      assert.equal(0, count(env, "name = 'bulk.dead'"))
      assert.equal(pushes, count(env, "name = 'bulk.pushed'"))
    end)

    it("a runner sent SIGTERM during a bulk retry stops in time, the jobs whole", function()
      dead_jobs(env)
      local base = H.start(env, "shutdown_timeout = 10")
      local _, status = background(env, "bulk", curl_post(base ..
        "/api/bulk/retry?name=bulk.dead"))
      jr.wait_for(function()
        return ended(status) or count(env, "name = 'bulk.dead' AND state = 'queued'") > 0
      end, 60, "the bulk retry started")
      local t0 = jr.now()
      env:stop("TERM", nil, 40)
      assert.is_true(jr.now() - t0 < 15, "stopped in " .. (jr.now() - t0) .. "s")
      jr.wait_for(function() return ended(status) end, 30, "curl ended")
      local queued = count(env, "name = 'bulk.dead' AND state = 'queued' AND attempts = 0")
      local dead = count(env, "name = 'bulk.dead' AND state = 'dead' AND attempts = 4")
      assert.equal(N, queued + dead)
    end)
  end)
end
