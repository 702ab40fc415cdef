-- http_spec.lua - the runner's HTTP server on each backend: /metrics in
-- the Prometheus text format (checked by promtool), the JSON API under
-- /api/ and its bad input (400, 401, 403, 404, 405, 413), the token and
-- loopback rules, cross-site writes refused, slow clients that never
-- stall the jobs, and waiting jobs counted by name and queue.
local jr = require "jr"
local H = require "jrhttp"

local q = jr.quote

local OK = "return function(job) end"
local BAD = 'return function(job) error("boom <script>alert(1)</script>") end'

-- Starts scripts ok and bad, pushes one of each; waits for ok done and bad
-- dead (max_retries 0).
local function with_jobs(env, extra)
  env:script("ok", OK)
  env:script("bad", BAD)
  local base = H.start(env, "defaults = { max_retries = 0 }" ..
    (extra and (", " .. extra) or ""))
  local ok = env:push("ok", '{"n":1}')
  local bad = env:push("bad", '{"html":"<script>x</script>"}')
  env:wait_state(bad, "dead")
  jr.wait_for(function() return env:job(ok) == nil end, 10, "ok done")
  return base, ok, bad
end

local function promtool(text)
  local f = os.tmpname()
  jr.write_file(f, text)
  local out, err, code = jr.sh("promtool check metrics < " .. q(f))
  os.remove(f)
  return code, out .. err
end

for _, backend in ipairs(jr.backends()) do
  -- one runner for the checks that change nothing (any order)
  describe(backend .. " http, reads and refusals:", function()
    local env, base, ok, bad
    setup(function()
      env = jr.env(backend)
      base, ok, bad = with_jobs(env)
    end)
    teardown(function() env:cleanup() end)

    it("serves /metrics in the Prometheus text format that promtool accepts", function()
      local code, text = H.req(base .. "/metrics", { token = true })
      assert.equal(200, code, text)
      local rc, why = promtool(text)
      assert.equal(0, rc, why)
      for _, want in ipairs({
        'jobrunner_jobs_finished_total{name="ok",queue="default",outcome="succeeded"} 1',
        'jobrunner_jobs_finished_total{name="bad",queue="default",outcome="dead"} 1',
        'jobrunner_job_duration_seconds_count{name="ok"} 1',
        'jobrunner_job_latency_seconds_count{name="bad"} 1',
        'jobrunner_jobs{name="bad",state="dead"} 1',
        'jobrunner_queue_jobs{queue="default",state="dead"} 1',
        'jobrunner_workers_target ',
        'jobrunner_db_cycle_seconds_count ',
        'jobrunner_loop_passes_total ',
        'jobrunner_reloads_total{result="ok"} 0',
        'jobrunner_lease_rescues_total 0',
        'jobrunner_generation_info{generation="',
      }) do
        assert.matches(want, text, 1, true)
      end
      assert.matches("# TYPE jobrunner_job_duration_seconds histogram", text, 1, true)
    end)

    it("answers the JSON API: stats, jobs, a job, the dead queue, queues, the runner", function()
      local stats = H.json(base .. "/api/stats")
      assert.equal(1, stats.dead)
      assert.equal(1, stats.names.bad.dead)
      assert.equal("default", stats.queues[1].name)
      local jobs = H.json(base .. "/api/jobs?state=dead&name=bad")
      assert.equal(1, #jobs)
      assert.equal(bad, jobs[1].id)
      local job = H.json(base .. "/api/jobs/" .. bad)
      assert.equal("dead", job.state)
      assert.equal('{"html":"<script>x</script>"}', (job.payload:gsub(" ", "")))
      assert.matches("boom <script>", job.last_error, 1, true)
      assert.matches("stack traceback", job.last_error, 1, true)
      -- the raw body escapes < so that it is inert inside HTML too
      local _, raw = H.req(base .. "/api/jobs/" .. bad, { token = true })
      assert.is_nil(raw:find("<", 1, true))
      local dead = H.json(base .. "/api/dead")
      assert.equal(bad, dead[1].id)
      assert.equal("default", H.json(base .. "/api/queues")[1].name)
      local runner = H.json(base .. "/api/runner")
      assert.equal(1, runner.done)
      assert.equal(60, #runner.throughput.minutes)
      assert.equal(ok + 1, bad)
    end)

    it("refuses bad requests with 400, 404, 405 and 413, and says why", function()
      local code, body = H.req(base .. "/api/jobs/999999", { token = true })
      assert.equal(404, code)
      assert.matches("999999", body)
      code, body = H.req(base .. "/api/jobs/abc", { token = true })
      assert.equal(400, code)
      assert.matches("invalid job id 'abc'", body, 1, true)
      code, body = H.req(base .. "/api/jobs?state=bogus", { token = true })
      assert.equal(400, code)
      assert.matches("bogus", body)
      code, body = H.req(base .. "/api/jobs?name=a%20b", { token = true })
      assert.equal(400, code)
      assert.matches("job name", body)
      code, body = H.req(base .. "/api/jobs?limit=0", { token = true })
      assert.equal(400, code)
      assert.matches("limit", body)
      code, body = H.req(base .. "/api/dead/retry", { token = true, body = '{"ids":[1,' })
      assert.equal(400, code)
      assert.matches("invalid JSON body at byte %d+", body)
      code, body = H.req(base .. "/api/dead/retry", { token = true, body = '{"idz":[1]}' })
      assert.equal(400, code)
      assert.matches("unknown key 'idz'", body, 1, true)
      code = H.req(base .. "/api/dead/retry", { token = true, body = ('{"ids":[%s]}'):format(("1,"):rep(40000) .. "1") })
      assert.equal(413, code)
      for _, path in ipairs({ "/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/dash/../../jobs.db", "/nope" }) do
        code = H.req(base .. path)
        assert.equal(404, code, path)
      end
      code = H.req(base .. "/api/nope", { token = true })
      assert.equal(404, code)
      code = H.req(base .. "/api/stats", { token = true, method = "POST" })
      assert.equal(405, code)
      code = H.req(base .. "/api/dead/retry", { token = true })
      assert.equal(405, code)
      assert.equal("dead", env:job(bad).state)
      -- the runner went on: a job pushed now runs
      local id = env:push("ok")
      jr.wait_for(function() return env:job(id) == nil end, 10, "job after bad requests")
    end)

    it("wants the token: 401 without it or with a wrong one, and nothing is done", function()
      for _, t in ipairs({ false, "wrong-token-0123456789abcdef", H.TOKEN .. "x" }) do
        local code, body, head = H.req(base .. "/api/dead/retry", { token = t, body = '{"all":true}' })
        assert.equal(401, code, body)
        assert.matches("WWW%-Authenticate: Bearer", head)
        code = H.req(base .. "/metrics", { token = t })
        assert.equal(401, code)
        code = H.req(base .. "/api/jobs", { token = t })
        assert.equal(401, code)
      end
      assert.equal("dead", env:job(bad).state)
      -- the page itself carries no data: served without the token
      assert.equal(200, (H.req(base .. "/")))
    end)

    it("refuses cross-site writes: a foreign Origin, a form's content type", function()
      local code, body = H.req(base .. "/api/dead/retry", { token = true, body = '{"all":true}',
        headers = { "Origin: http://evil.example" } })
      assert.equal(403, code)
      assert.matches("cross%-site", body)
      code, body = H.req(base .. "/api/dead/retry", { token = true, body = 'all=true',
        type = "application/x-www-form-urlencoded" })
      assert.equal(403, code)
      assert.matches("application/json", body, 1, true)
      code, body = H.req(base .. "/api/dead/retry", { token = true, body = '{"all":true}', type = "text/plain" })
      assert.equal(403, code)
      assert.equal("dead", env:job(bad).state)
    end)
  end)

  describe(backend .. " http:", function()
    local env = jr.test_env(backend)

    it("retries, purges and cancels with the token; pauses and resumes a queue", function()
      local base, _, bad = with_jobs(env)
      -- the page's own origin is fine
      local r = H.json(base .. "/api/jobs/" .. bad .. "/retry", 200, { method = "POST",
        headers = { "Origin: " .. base } })
      assert.equal(1, r.retried)
      env:wait_state(bad, "dead")   -- it ran again and died again
      assert.equal(1, H.json(base .. "/api/dead/retry", 200, { body = '{"ids":[' .. bad .. ']}' }).retried)
      env:wait_state(bad, "dead")
      -- purge one: only a dead job goes
      local queued = env:push("nohandler")
      assert.equal(0, H.json(base .. "/api/jobs/" .. queued .. "/purge", 200, { method = "POST" }).purged)
      assert.equal(0, H.json(base .. "/api/dead/purge", 200, { body = '{"ids":[' .. queued .. ']}' }).purged)
      assert.equal("queued", env:job(queued).state)
      assert.equal(1, H.json(base .. "/api/jobs/" .. bad .. "/purge", 200, { method = "POST" }).purged)
      assert.is_nil(env:job(bad))
      assert.equal(0, H.json(base .. "/api/dead/purge", 200, { body = '{"all":true}' }).purged)
      local p = H.json(base .. "/api/queues/mail/pause", 200, { method = "POST" })
      assert.is_true(p.paused)
      local later = env:push("ok", "{}", "--queue", "mail")
      local c = H.json(base .. "/api/cancel", 200, { body = '{"ids":[' .. later .. ', 999999]}' })
      assert.equal("cancelled", c.jobs[1].outcome)
      assert.equal("not_found", c.jobs[2].outcome)
      assert.is_false(H.json(base .. "/api/queues/mail/resume", 200, { method = "POST" }).paused)
    end)

    it("counts waiting jobs in /metrics by name and by queue, and in /api/stats", function()
      local base = H.start(env, "")
      local parent = env:push("nohandler", "{}", "--in", "1h")
      local kids = {}
      for i = 1, 2 do
        kids[i] = env:push("child", "{}", "--after", tostring(parent), "--queue", "media")
      end
      for _, id in ipairs(kids) do assert.equal("waiting", env:job(id).state) end
      local function metrics()
        local code, text = H.req(base .. "/metrics", { token = true })
        assert.equal(200, code, text)
        local rc, why = promtool(text)
        assert.equal(0, rc, why)
        return text
      end
      local text = metrics()
      for _, want in ipairs({
        'jobrunner_jobs{name="child",state="waiting"} 2\n',
        'jobrunner_jobs{name="child",state="ready"} 0\n',
        'jobrunner_jobs{name="nohandler",state="waiting"} 0\n',
        'jobrunner_jobs{name="nohandler",state="scheduled"} 1\n',
        'jobrunner_queue_jobs{queue="media",state="waiting"} 2\n',
        'jobrunner_queue_jobs{queue="default",state="waiting"} 0\n',
      }) do
        assert.matches(want, text, 1, true)
      end
      local stats = H.json(base .. "/api/stats")
      assert.equal(2, stats.waiting)
      assert.equal(2, stats.names.child.waiting)
      -- the parent cancelled: its children with it, and nothing waits
      assert.equal(0, select(3, env:cli("cancel", tostring(parent))))
      for _, id in ipairs(kids) do env:wait_state(id, "cancelled") end
      -- the gauges are read again from the database within a minute
      jr.wait_for(function()
        text = metrics()
        return text:find('jobrunner_jobs{name="child",state="waiting"} 0\n', 1, true)
      end, 65, "the waiting gauge back to 0")
      assert.matches('jobrunner_queue_jobs{queue="media",state="waiting"} 0\n', text, 1, true)
      assert.matches('jobrunner_queue_jobs{queue="media",state="cancelled"} 2\n', text, 1, true)
      assert.equal(0, H.json(base .. "/api/stats").waiting)
    end)

    it("keeps draining jobs while a client sends nothing and another reads nothing", function()
      env:script("ok", OK)
      env:script("fan", [[local jobrunner = require "jobrunner"
        return function(job)
          for i = 1, 40 do jobrunner.push("ok", { i = i }) end
        end]])
      local base = H.start(env, "concurrency = 2")
      local port = base:match(":(%d+)$")
      local pids = {}
      local function bg(script)
        local out = jr.sh(("bash -c %s >/dev/null 2>&1 & echo $!"):format(q(script)))
        pids[#pids + 1] = tonumber(out:match("%d+"))
      end
      finally(function()
        for _, pid in ipairs(pids) do os.execute("kill " .. pid .. " 2>/dev/null") end
      end)
      -- connects, sends nothing
      bg(("exec 3<>/dev/tcp/127.0.0.1/%s; sleep 30"):format(port))
      -- sends requests, never reads a reply
      bg(("exec 3<>/dev/tcp/127.0.0.1/%s; for i in $(seq 1 300); do " ..
          "printf 'GET /metrics HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer %s\\r\\n\\r\\n' >&3; " ..
          "done; sleep 30"):format(port, H.TOKEN))
      -- half a request, then silence
      bg(("exec 3<>/dev/tcp/127.0.0.1/%s; printf 'POST /api/cancel HTTP/1.1\\r\\nContent-Length: 100\\r\\n\\r\\n{' >&3; sleep 30"):format(port))
      jr.sleep(0.3)
      env:push("fan")
      local done = 'jobrunner_jobs_finished_total{name="ok",queue="default",outcome="succeeded"} 40'
      jr.wait_for(function()
        local code, text = H.req(base .. "/metrics", { token = true })
        return code == 200 and text:find(done, 1, true)
      end, 15, "40 jobs drained beside slow clients")
      -- a job counts as finished when its result reaches the runner; its
      -- row goes with the database round that records it
      jr.wait_for(function() return env:count() == 0 end, 15, "the 40 jobs' rows gone")
      assert.equal(0, env:stop())
    end)

    it("refuses a non-loopback address without a token, an invalid one, one in use", function()
      env:script("ok", OK)
      local function fails(http, want)
        env:config(http)
        -- bounded: a runner that wrongly starts must not hang the spec
        local _, err, code = jr.sh(("cd %s && timeout 10 %s -c %s run"):format(
          q(env.dir), q(jr.bin), q(env.config_file)))
        assert.equal(1, code, err)
        assert.matches(want, err, 1, true)
      end
      fails('http = { listen = "0.0.0.0:0" }', "http.listen '0.0.0.0:0' is not a loopback address: set http.token")
      fails('http = { listen = "[::]:0" }', "is not a loopback address")
      fails('http = { listen = "example.com:80", token = "' .. H.TOKEN .. '" }', "invalid address")
      -- not HOST:PORT at all: `check` says so, with the line
      for _, bad in ipairs({ "nonsense", "127.0.0.1:99999" }) do
        env:config('http = { listen = "' .. bad .. '" }')
        local _, err, code = env:cli("check")
        assert.equal(3, code, err)
        assert.matches("'http.listen' '" .. bad .. "' is not HOST:PORT", err,
          1, true)
      end
      local base = H.start(env)
      fails('pid_file = "second.pid", http = { listen = "' .. base:match("//(.*)$") .. '" }',
        "http.listen '" .. base:match("//(.*)$") .. "': cannot listen: Address already in use")
      env:config('http = { listen = "127.0.0.1:0", tokn = "x" }')
      local _, err, code = env:cli("check")
      assert.equal(3, code)
      assert.matches("jobrunner.lua:%d+: 'http.tokn' is not a key of http", err)
      env:config('http = { listen = "127.0.0.1:0", token = "short" }')
      _, err = env:cli("check")
      assert.matches("'http.token' is too short", err, 1, true)
      local _, err2, code2 = env:cli("run", "--http")
      assert.equal(2, code2)
      assert.matches("'--http' needs a value", err2, 1, true)
    end)

    it("run --http ADDR serves without a token: reads open, every write refused (403)", function()
      env:script("ok", OK)
      env:start(nil, { args = { "--http", "127.0.0.1:0" } })
      local port = jr.wait_for(function()
        return env:log():match("http: listening on http://127%.0%.0%.1:(%d+)/")
      end, 10, "http listening")
      local base = "http://127.0.0.1:" .. port
      assert.equal(200, (H.req(base .. "/metrics")))
      assert.equal(200, (H.req(base .. "/api/stats")))
      local code, body = H.req(base .. "/api/dead/retry", { body = '{"all":true}' })
      assert.equal(403, code)
      assert.matches("http.token", body, 1, true)
    end)
  end)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " http reads:", function()
    local env = jr.test_env(backend)

    it("answer on a connection of their own while the runner's waits on a lock", function()
      env:script("ok", OK)
      local base = H.start(env)
      local id = env:push("ok", "{}", "--in", "1s")
      -- another session takes the write lock for 4 s: the runner's claim
      -- of the job (due in 1 s) waits behind it; reads are not blocked
      local sql = backend == "postgres"
        and ("BEGIN; LOCK TABLE %s.jobs IN EXCLUSIVE MODE;"):format(env.schema)
        or "BEGIN IMMEDIATE;"
      local cli = backend == "postgres"
        and ("psql -X -q %s"):format(q(jr.pg_url))
        or ("sqlite3 %s"):format(q(env:sqlite_path()))
      local freed = env.dir .. "/freed"
      local holder = tonumber(jr.sh(("bash -c %s >/dev/null 2>&1 & echo $!"):format(
        q(("{ echo %s; sleep 4; echo 'COMMIT;'; } | %s; touch %s"):format(
          q(sql), cli, q(freed))))):match("%d+"))
      finally(function() os.execute("kill " .. holder .. " 2>/dev/null") end)
      jr.sleep(2)
      local list = H.json(base .. "/api/jobs?state=queued", 200)
      local code, text = H.req(base .. "/metrics", { token = true })
      -- both answered while the lock was still held
      assert.is_nil(io.open(freed), "answered only once the lock was gone")
      assert.equal(id, list[1].id)
      assert.equal(200, code)
      assert.truthy(text:find('jobrunner_jobs{name="ok",state="', 1, true))
      -- and the job runs once the lock is gone
      jr.wait_for(function() return env:job(id) == nil end, 15, "job done")
      assert.equal(0, env:stop())
    end)
  end)
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " http requests at their edges:", function()
    local env = jr.test_env(backend)

    it("pauses and resumes a queue named with ':' (percent-encoded), refuses a NUL in a filter", function()
      env:script("ok", OK)
      local base = H.start(env)
      local id = env:push("ok", "{}", "--queue", "media:hd")
      jr.wait_for(function() return env:job(id) == nil end, 15, "job done")
      local p = H.json(base .. "/api/queues/media%3Ahd/pause", 200, { method = "POST" })
      assert.is_true(p.paused)
      local later = env:push("ok", "{}", "--queue", "media:hd")
      jr.sleep(1)
      assert.equal("queued", env:job(later).state)
      assert.is_false(H.json(base .. "/api/queues/media%3ahd/resume", 200, { method = "POST" }).paused)
      jr.wait_for(function() return env:job(later) == nil end, 15, "job done after resume")
      -- decoded once: %253A is the text '%3A', not a valid name
      local code, body = H.req(base .. "/api/queues/media%253Ahd/pause", { token = true, method = "POST",
        type = "application/json" })
      assert.equal(400, code, body)
      assert.matches("invalid queue name 'media%3Ahd'", body, 1, true)
      for _, bad in ipairs({ "media%zzhd", "media%0", "media%00hd" }) do
        code, body = H.req(base .. "/api/queues/" .. bad .. "/pause", { token = true, method = "POST",
          type = "application/json" })
        assert.equal(400, code, bad .. ": " .. body)
        assert.matches("percent-encoding", body, 1, true)
      end
      for _, f in ipairs({ "name=%00other", "queue=%00x", "state=%00", "state=dead&name=ok%00" }) do
        code, body = H.req(base .. "/api/jobs?" .. f, { token = true })
        assert.equal(400, code, f .. ": " .. body)
        assert.matches("NUL", body, 1, true)
        code = H.req(base .. "/api/dead?" .. f, { token = true })
        assert.equal(400, code, f)
      end
      assert.equal(0, env:stop())
    end)

    it("answers other methods with 405 and a JSON error naming the methods allowed", function()
      env:script("ok", OK)
      local base = H.start(env)
      for _, m in ipairs({ "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE" }) do
        for path, allow in pairs({ ["/api/stats"] = "GET, HEAD", ["/api/cancel"] = "POST",
                                   ["/"] = "GET, HEAD", ["/metrics"] = "GET, HEAD" }) do
          local code, body, head = H.req(base .. path, { token = true, method = m })
          assert.equal(405, code, m .. " " .. path .. ": " .. body)
          assert.matches("Content-Type: application/json", head, 1, true)
          assert.matches("Allow: " .. allow, head, 1, true)
          assert.is_string(require("cjson").decode(body).error)
        end
      end
      assert.equal(0, env:stop())
    end)

    it("answers a body too large (413) and a malformed request (400) in JSON", function()
      env:script("ok", OK)
      local base = H.start(env)
      local port = base:match(":(%d+)$")
      local big = ('{"ids":[%s]}'):format(("1,"):rep(40000) .. "1")
      for _, expect in ipairs({ {}, { "Expect:" } }) do
        local code, body, head = H.req(base .. "/api/dead/retry", { token = true, body = big, headers = expect })
        assert.equal(413, code, body)
        assert.matches("Content-Type: application/json", head, 1, true)
        assert.matches("at most 65536 bytes", require("cjson").decode(body).error, 1, true)
      end
      local code, body, head = H.req(base .. "/api/stats", { token = true,
        headers = { "X-Big: " .. ("a"):rep(20000) } })
      assert.equal(400, code, body)
      assert.matches("Content-Type: application/json", head, 1, true)
      assert.matches("headers over 16384 bytes", require("cjson").decode(body).error, 1, true)
      local out = jr.sh(("bash -c %s"):format(q(("exec 3<>/dev/tcp/127.0.0.1/%s; " ..
        "printf 'GARBAGE\\r\\n\\r\\n' >&3; timeout 10 cat <&3"):format(port))))
      assert.matches("^HTTP/1%.1 400", out)
      assert.matches("Content-Type: application/json", out, 1, true)
      assert.matches('{"error":"malformed request', out, 1, true)
      -- the server goes on
      assert.equal(200, (H.req(base .. "/api/stats", { token = true })))
      assert.equal(0, env:stop())
    end)

    it("without a token, serves only requests whose Host names this server (DNS rebinding)", function()
      env:script("ok", OK)
      local base = H.start(env, nil, { token = false })
      local port = base:match(":(%d+)$")
      for _, host in ipairs({ "evil.example:" .. port, "evil.example", "127.0.0.1.evil.example:" .. port,
                              "localhost:1", "localhost:" .. port .. "x" }) do
        for _, path in ipairs({ "/api/stats", "/api/jobs", "/metrics", "/" }) do
          local code, body = H.req(base .. path, { headers = { "Host: " .. host } })
          assert.equal(403, code, host .. " " .. path .. ": " .. body)
          assert.matches("Host", body, 1, true)
        end
      end
      for _, host in ipairs({ "127.0.0.1:" .. port, "localhost:" .. port, "LocalHost:" .. port,
                              "[::1]:" .. port }) do
        local code, body = H.req(base .. "/api/stats", { headers = { "Host: " .. host } })
        assert.equal(200, code, host .. ": " .. body)
      end
      assert.equal(0, env:stop())
    end)
  end)
end

describe("http.token in the config:", function()
  local env = jr.test_env("sqlite")

  it("works when it is long; is refused when blank, with a space, or too long", function()
    env:script("ok", OK)
    local long = ("t"):rep(300)
    local base = H.start(env, nil, { token = long })
    assert.equal(200, (H.req(base .. "/api/stats", { token = long })))
    assert.equal(401, (H.req(base .. "/api/stats", { token = long:sub(1, 255) })))
    assert.equal(0, env:stop())
    for token, want in pairs({ [(" "):rep(20)] = "'http.token' is blank",
                               [("\t"):rep(20)] = "'http.token' is blank",
                               ["spec token 0123456789"] = "'http.token' has a space",
                               [("t"):rep(5000)] = "'http.token' is too long" }) do
      env:config(('http = { listen = "127.0.0.1:0", token = %q }'):format(token))
      local _, err, code = env:cli("check")
      assert.equal(3, code, err)
      assert.matches(want, err, 1, true)
      local _, err2, code2 = jr.sh(("cd %s && timeout 10 %s -c %s run"):format(
        q(env.dir), q(jr.bin), q(env.config_file)))
      assert.not_equal(0, code2)
      assert.matches(want, err2, 1, true)
    end
  end)
end)
