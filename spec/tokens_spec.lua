-- tokens_spec.lua - the HTTP server's scoped tokens (http.tokens), as a
-- security review would try them, on each backend: a read token tries
-- every write route of the API, the list read from the route tables of
-- runtime/http/*.c (each topic api.c's TOPICS names), so that a route
-- added later is tried too: each is refused 403 and nothing in the
-- database changes; so is a push token on every route but the pushes,
-- and a push token's push, batch or flow to a queue not its own; the
-- write token and the old http.token act, each write logged with the
-- token's name; no secret shows in the log, /metrics or any error. Then
-- (SQLite only: the config is the same on both engines) a token file
-- others may read, a secret in the config's text and the other bad
-- entries stop the runner at start naming the key.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

local q = jr.quote
local READ = "read-secret-0123456789abcdef"
local WRITE = "write-secret-0123456789abcdef"
local PUSH = "push-secret-0123456789abcdef"
local SECRETS = { READ, WRITE, PUSH, H.TOKEN }
local FLAKY = 'return function(job) error("flaky failed") end'

-- The API's routes from the tables of runtime/http/*.c: { path, method }
-- for each row of each table whose topic api.c's TOPICS lists. A row's
-- second field is 1 (POST) or 0 (GET), or names its method.
local function routes()
  local dir = jr.root .. "/runtime/http/"
  local topics, found, list = {}, {}, {}
  local tlist = jr.read_file(dir .. "api.c"):match("#define TOPICS%(X%)(.-)\n\n")
  for t in assert(tlist, "api.c's TOPICS"):gmatch("X%((%w+)%)") do topics[t] = true end
  for file in io.popen("ls " .. q(dir) .. "*.c"):lines() do
    local text = jr.read_file(file)
    for topic, body in text:gmatch("jr_apiroute%s+jr_apiroutes_(%w+)%[%]%s*=%s*(%b{})") do
      found[topic] = topics[topic] and true
      for path, how in body:gmatch('{%s*"([^"]+)",%s*([^,]+),') do
        local method = how == "0" and "GET" or how == "1" and "POST" or
          how:match("PUT") or how:match("DELETE") or how:match("PATCH") or
          how:match("POST") or "GET"
        if topics[topic] then list[#list + 1] = { path = path, method = method } end
      end
    end
  end
  for t in pairs(topics) do assert.is_true(found[t], "no route table for topic " .. t) end
  return list
end

-- The push routes, which a push token may use to its queues.
local PUSHES = { ["POST jobs"] = true, ["POST flows"] = true }

-- path with its '*' filled in by the segment before it.
local function fill(path, ids)
  return (path:gsub("([%w_]*)/%*", function(before)
    local v = before == "jobs" and ids.dead or before == "queues" and "deploys" or
      before == "schedules" and "nightly" or before == "batches" and "1" or "x"
    return before .. "/" .. v
  end))
end

-- Every row of every table of env's database, ordered by its first column.
local function snapshot(env)
  local names
  if env.backend == "postgres" then
    names = env:query(("SELECT table_name AS name FROM information_schema.tables " ..
      "WHERE table_schema = '%s'"):format(env.schema))
  else
    names = env:query("SELECT name FROM sqlite_master WHERE type = 'table' " ..
      "AND name NOT LIKE 'sqlite_%'")
  end
  local all = {}
  for _, t in ipairs(names) do
    all[t.name] = env:query(("SELECT * FROM %s ORDER BY 1"):format(t.name))
  end
  assert.is_table(all.jobs)
  return all
end

local function no_secret(text, where)
  for _, s in ipairs(SECRETS) do
    assert.is_nil(text:find(s, 1, true), "a secret in " .. where)
  end
end

-- Writes a token file of mode; returns its path.
local function token_file(env, name, secret, mode)
  local path = env.dir .. "/" .. name
  jr.write_file(path, secret .. "\n")
  jr.sh(("chmod %s %s"):format(mode, q(path)))
  return path
end

-- The config of a read token (its file group-readable, as the Debian
-- package's), a write token from the environment, a push token for the
-- queues (text; "deploys" by default), and the old http.token.
local function config(env, queues)
  local http = ([[tokens = {
      { name = "grafana", scope = "read", token_file = %q },
      { name = "ops", scope = "write", token_env = "JR_SPEC_OPS_TOKEN" },
      { name = "ci", scope = "push", queues = { %s }, token_file = %q } }]]):format(
    token_file(env, "grafana", READ, "0640"), queues or '"deploys"',
    token_file(env, "ci", PUSH, "0600"))
  env:config(('http = { listen = "127.0.0.1:0", token = %q, %s }, ' ..
    'defaults = { max_retries = 0 }, schedules = { { name = "nightly", ' ..
    'cron = "0 0 1 1 *", job = "nohandler" } }'):format(H.TOKEN, http))
end

-- The runner with config(env); returns the base URL.
local function start(env)
  config(env)
  env:start("JR_SPEC_OPS_TOKEN=" .. WRITE)
  local port = jr.wait_for(function()
    return env:log():match("http: listening on http://127%.0%.0%.1:(%d+)/")
  end, 10, "http listening")
  return "http://127.0.0.1:" .. port
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " scoped tokens:", function()
    local env = jr.test_env(backend)

    it("a read token cannot act: every write route 403, nothing changed; nor a push token beside its pushes",
      function()
      env:script("flaky", FLAKY)
      -- pushed first: the CLI reads the config too, and the write
      -- token's variable is the runner's only
      local ids = { dead = env:push("flaky", "{}") }
      env:push("nohandler", "{}", "--queue", "deploys")
      env:push("nohandler", "{}", "--in", "1h")
      local base = start(env)
      env:wait_state(ids.dead, "dead")
      local list, writes = routes(), 0
      local before = snapshot(env)
      assert.is_true(#before.jobs >= 3)
      for _, r in ipairs(list) do
        if r.method ~= "GET" then
          writes = writes + 1
          local url = base .. "/api/" .. fill(r.path, ids) ..
            (r.path:match("^bulk/") and "?state=dead" or "")
          local body = r.path == "jobs" and '{"name":"x","queue":"deploys"}' or '{"all":true}'
          local key = r.method .. " " .. r.path
          for _, t in ipairs({ { READ, "grafana" }, { PUSH, "ci" } }) do
            if not (t[2] == "ci" and PUSHES[key]) then
              local code, text = H.req(url, { method = r.method, body = body, token = t[1] })
              assert.equal(403, code, key .. " with " .. t[2] .. ": " .. text)
              local need = PUSHES[key] and "push" or "write"
              assert.matches(("needs a %s token: token '%s'"):format(need, t[2]), text, 1, true)
              no_secret(text, "the refusal of " .. key)
            end
          end
        end
      end
      assert.is_true(writes >= 20, "only " .. writes .. " write routes found")
      assert.same(before, snapshot(env))
      -- the read token reads: the API, /metrics, what it may do
      local who = H.json(base .. "/api/whoami", 200, { token = READ })
      assert.same({ name = "grafana", scope = "read", queues = cjson.null, write = false },
        { name = who.name, scope = who.scope, queues = who.queues, write = who.write })
      assert.equal(1, H.json(base .. "/api/stats", 200, { token = READ }).dead)
      local code, metrics = H.req(base .. "/metrics", { token = READ })
      assert.equal(200, code)
      no_secret(metrics, "/metrics")
      -- no token, an unknown one: 401
      for _, t in ipairs({ false, "not-a-token-0123456789abc", READ .. "x" }) do
        local c, text = H.req(base .. "/api/stats", { token = t })
        assert.equal(401, c, text)
        no_secret(text, "a 401")
      end
      -- the write token and the old http.token act, logged by name
      assert.equal(1, H.json(base .. "/api/jobs/" .. ids.dead .. "/retry", 200,
        { body = "{}", token = WRITE }).retried)
      H.json(base .. "/api/queues/mail/pause", 200, { body = "{}", token = true })
      local log = env:log()
      assert.matches(("http: token 'ops' (write): POST /api/jobs/%d/retry: retry, job %d")
        :format(ids.dead, ids.dead), log, 1, true)
      assert.matches("http: token 'http.token' (write): POST /api/queues/mail/pause: " ..
        "pause, queue 'mail'", log, 1, true)
      assert.matches("http: refused: POST /api/bulk/purge: token 'grafana' (scope read)", log, 1, true)
      no_secret(log, "the log")
    end)

    it("a push token pushes to its queues only, in a batch and a flow too", function()
      local base = start(env)
      local function push(body)
        return H.req(base .. "/api/jobs", { body = body, token = PUSH })
      end
      local code, text = push('{"name":"deploy","queue":"deploys"}')
      assert.equal(201, code, text)
      local id = math.tointeger(cjson.decode(text).id)
      assert.equal("deploys", env:job(id).queue)
      assert.matches(("http: token 'ci' (push): POST /api/jobs: push, to queue deploys")
        , env:log(), 1, true)
      code, text = push('{"name":"deploy","queue":"other"}')
      assert.equal(403, code, text)
      assert.matches("the job goes to queue 'other': token 'ci' (scope push) may read and " ..
        "push (POST /api/jobs, /api/flows) to queue 'deploys' only", text, 1, true)
      code, text = push('{"name":"deploy"}')
      assert.equal(403, code, text)
      assert.matches("queue 'default'", text, 1, true)
      code, text = push('[{"name":"deploy","queue":"deploys"},{"name":"deploy","queue":"other"}]')
      assert.equal(403, code, text)
      assert.matches("jobs[1] goes to queue 'other'", text, 1, true)
      code, text = H.req(base .. "/api/flows", { token = PUSH, body = cjson.encode({
        jobs = { { ref = "a", name = "deploy", queue = "deploys" },
                 { ref = "b", name = "deploy", queue = "other", after = { "a" } } } }) })
      assert.equal(403, code, text)
      assert.matches("the flow's job 'b' goes to queue 'other'", text, 1, true)
      assert.equal(1, env:count())            -- the one push allowed, nothing else
      code, text = H.req(base .. "/api/flows", { token = PUSH, body = cjson.encode({
        jobs = { { ref = "a", name = "deploy", queue = "deploys" } } }) })
      assert.equal(201, code, text)
      assert.equal(2, env:count())
      -- it reads (a job it pushed, say), but acts on none
      assert.equal(id, math.tointeger(H.json(base .. "/api/jobs/" .. id, 200,
        { token = PUSH }).id))
      code = H.req(base .. "/api/jobs/" .. id .. "/cancel", { body = "{}", token = PUSH })
      assert.equal(403, code)
      assert.equal("queued", env:job(id).state)
      -- a reload keeps the tokens the server started with, and says so
      config(env, '"deploys", "other"')
      env:signal("HUP")
      jr.wait_for(function() return env:log():find("reload: http.tokens changed", 1, true) end,
        20, "the reload's warning")
      assert.equal(403, (push('{"name":"deploy","queue":"other"}')))
      no_secret(env:log(), "the log")
    end)
  end)
end

describe("http.tokens refused at start:", function()
  local env = jr.test_env("sqlite")

  -- `check` fails (3) and `run` stops (non-zero), both with want.
  local function refused(tokens, want, prefix)
    env:config(('http = { listen = "127.0.0.1:0", tokens = { %s } }'):format(tokens))
    local _, err, code = jr.sh(("cd %s && %s %s -c %s check"):format(q(env.dir),
      prefix or "", q(jr.bin), q(env.config_file)))
    assert.equal(3, code, err)
    assert.matches(want, err, 1, true)
    no_secret(err, "an error")
    local _, err2, code2 = jr.sh(("cd %s && %s timeout 20 %s -c %s run"):format(
      q(env.dir), prefix or "", q(jr.bin), q(env.config_file)))
    assert.not_equal(0, code2)
    assert.matches(want, err2, 1, true)
    no_secret(err2, "an error")
  end

  it("a token file others may read or write, naming the file and its mode", function()
    for _, mode in ipairs({ "0644", "0604", "0602" }) do
      local path = token_file(env, "grafana", READ, mode)
      refused(('{ name = "grafana", scope = "read", token_file = %q }'):format(path),
        ("'http.tokens[1].token_file' names '%s', which others may read or write " ..
         "(mode %s): chmod o-rw it"):format(path, mode))
    end
  end)

  it("a secret in the config's text, a missing or empty file, bad names, scopes and queues",
    function()
    local ok = token_file(env, "ok", READ, "0600")
    local function entry(s) return ("{ %s, token_file = %q }"):format(s, ok) end
    refused(entry('name = "a", scope = "read"') .. (', { name = "b", scope = "write", ' ..
      'token = %q }'):format(WRITE), "'http.tokens[2].token' is refused: a scoped " ..
      "token's secret never sits in the config's text")
    refused(('{ name = "a", scope = "read", token_file = %q }'):format(env.dir .. "/none"),
      "'http.tokens[1].token_file' names '" .. env.dir .. "/none', which cannot be read")
    refused(('{ name = "a", scope = "read", token_file = %q }'):format(
      token_file(env, "empty", "", "0600")), "'http.tokens[1].token_file' gives a token " ..
      "that is blank")
    refused(('{ name = "a", scope = "read", token_file = %q }'):format(
      token_file(env, "two", READ .. "\nsecond", "0600")), "'http.tokens[1].token_file' " ..
      "gives a token that has a space, a control character or a non-ASCII byte " ..
      "(character " .. (#READ + 1) .. ")")
    refused('{ name = "a", scope = "read" }', "'http.tokens[1]' ('a') needs its secret " ..
      "in token_file (a file) or token_env (an environment variable)")
    refused('{ name = "a", scope = "read", token_env = "JR_SPEC_NO_VAR" }',
      "'http.tokens[1].token_env' names the environment variable 'JR_SPEC_NO_VAR', " ..
      "which is not set", "env -u JR_SPEC_NO_VAR")
    refused(entry('name = "a", scope = "admin"'), "'http.tokens[1].scope' must be " ..
      "\"read\", \"push\" or \"write\", got 'admin'")
    refused(entry('name = "a b", scope = "read"'), "'http.tokens[1].name' must be 1 to " ..
      "64 letters, digits, '_' or '-', got 'a b'")
    refused(entry('scope = "read"'), "'http.tokens[1].name' is missing")
    refused(entry('name = "a", scope = "read"') .. ", " .. entry('name = "a", scope = "write"'),
      "'http.tokens[2].name' 'a' is the name of http.tokens[1] too: names are unique")
    refused(entry('name = "a", scope = "read"') .. ", " .. entry('name = "b", scope = "write"'),
      "'http.tokens[2]' ('b') has the secret of http.tokens[1] ('a'): each token needs " ..
      "its own")
    refused(entry('name = "ci", scope = "push"'), "'http.tokens[1].queues' is missing: " ..
      "a push token names the queues it may push to")
    refused(entry('name = "ci", scope = "read", queues = { "deploys" }'),
      "'http.tokens[1].queues' is only for a push token")
    refused(entry('name = "ci", scope = "push", queues = { "no queue" }'),
      "'http.tokens[1].queues[1]'")
    refused(entry('name = "ci", scope = "push", queues = {}'),
      "'http.tokens[1].queues' must be a list of 1 to 1000 queue names")
    refused(entry('name = "a", scope = "read", colour = "red"'),
      "'http.tokens[1].colour' is not a key of a token")
    refused(entry('name = "a", scope = "read", decrypt = "yes"'),
      "'http.tokens[1].decrypt' must be true or false, got string")
    refused(entry('name = "a", scope = "write", decrypt = false'),
      "'http.tokens[1].decrypt' cannot be false for a write token")
  end)
end)
