-- tokens_red_spec.lua - the scoped tokens (http.tokens) as an attacker
-- holding a push token would try them, on each backend: unique keys,
-- sequences and batches are shared by every queue, so a push token's job
-- with on_conflict "replace" rewrote another queue's job (its payload,
-- its run_at), one with a unique key held another queue's key (its
-- pushes dropped as duplicates), one in a sequence held up another
-- queue's jobs behind it, and one joining a batch held back its
-- callbacks: each is refused 403 now, nothing pushed, while the write
-- token keeps them. A request with two Authorization headers, which
-- took the first, is 400 whatever they hold. A secret a client put in
-- the query (?access_token=...) was written to the write log with the
-- route: the log shows only the parameters the API's writes read.
local jr = require "jr"
local H = require "jrhttp"
local cjson = require "cjson"

local READ = "read-secret-0123456789abcdef"
local WRITE = "write-secret-0123456789abcdef"
local PUSH = "push-secret-0123456789abcdef"

local function token_file(env, name, secret)
  local path = env.dir .. "/" .. name
  jr.write_file(path, secret .. "\n")
  jr.sh("chmod 0600 " .. jr.quote(path))
  return path
end

-- The runner with a read, a write and a push token (to "deploys");
-- returns its base URL.
local function start(env)
  env:config(([[http = { listen = "127.0.0.1:0", tokens = {
      { name = "grafana", scope = "read", token_file = %q },
      { name = "ops", scope = "write", token_file = %q },
      { name = "ci", scope = "push", queues = { "deploys" }, token_file = %q } } }]])
    :format(token_file(env, "grafana", READ), token_file(env, "ops", WRITE),
      token_file(env, "ci", PUSH)))
  env:start()
  local port = jr.wait_for(function()
    return env:log():match("http: listening on http://127%.0%.0%.1:(%d+)/")
  end, 10, "http listening")
  return "http://127.0.0.1:" .. port
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " scoped tokens, red team:", function()
    local env = jr.test_env(backend)

    it("a push token's job takes no unique key, sequence or existing batch: " ..
       "each could act on another queue's jobs", function()
      local base = start(env)
      local function post(path, body, token)
        return H.req(base .. path, { body = cjson.encode(body), token = token })
      end
      -- another queue's jobs, pushed by the write token
      local code, text = post("/api/jobs", { name = "invoice", queue = "other",
        unique_key = "inv-7", payload = { v = 1 }, delay = "1h" }, WRITE)
      assert.equal(201, code, text)
      local victim = math.tointeger(cjson.decode(text).id)
      code, text = post("/api/flows", { jobs = { { ref = "a", name = "x", queue = "other",
        run_in = 3600 } }, batch = { on_complete = "report", queue = "other" } }, WRITE)
      assert.equal(201, code, text)
      local batch = math.tointeger(cjson.decode(text).batch)
      local before = env:query("SELECT id, queue, payload, run_at FROM jobs ORDER BY id")
      for _, t in ipairs({
        { { name = "invoice", queue = "deploys", unique_key = "inv-7", on_conflict = "replace",
            payload = { v = 666 } }, "the job has unique_key: a unique key is shared by " ..
            "every queue, and the job could hold or replace another queue's: token 'ci'" },
        { { name = "invoice", queue = "deploys", unique_key = "inv-8", delay = "300d" },
          "the job has unique_key" },
        { { name = "ledger", queue = "deploys", sequence = "cust-7", delay = "300d" },
          "the job has sequence: a sequence is shared by every queue, and the job " ..
          "could hold up another queue's: token 'ci'" },
        { { name = "x", queue = "deploys", batch = batch, delay = "300d" },
          "the job has batch: the job would join an existing batch, which may be " ..
          "another queue's: token 'ci'" },
        { { { name = "x", queue = "deploys" }, { name = "invoice", queue = "deploys",
            unique_key = "inv-7", on_conflict = "replace" } }, "jobs[1] has unique_key" },
      }) do
        code, text = post("/api/jobs", t[1], PUSH)
        assert.equal(403, code, text)
        assert.matches(t[2], text, 1, true)
      end
      assert.same(before, env:query("SELECT id, queue, payload, run_at FROM jobs ORDER BY id"))
      assert.equal(1, H.json(base .. "/api/batches/" .. batch, 200, { token = READ }).total)
      assert.matches("http: refused: a push with unique_key", env:log(), 1, true)
      -- a plain push to its queue still goes; the write token keeps the options
      code, text = post("/api/jobs", { name = "deploy", queue = "deploys" }, PUSH)
      assert.equal(201, code, text)
      code, text = post("/api/jobs", { name = "invoice", queue = "other", unique_key = "inv-7",
        on_conflict = "replace", payload = { v = 2 } }, WRITE)
      assert.equal(201, code, text)
      assert.same({ id = victim, outcome = "replaced" }, cjson.decode(text))
      assert.same({ v = 2 }, cjson.decode(env:job(victim).payload))
    end)

    it("two Authorization headers are 400, whatever they hold, and nothing is done", function()
      local base = start(env)
      for _, pair in ipairs({ { READ, WRITE }, { WRITE, READ }, { WRITE, WRITE } }) do
        local code, text = H.req(base .. "/api/queues/mail/pause", { body = "{}",
          token = pair[1], headers = { "Authorization: Bearer " .. pair[2] } })
        assert.equal(400, code, text)
        assert.matches("more than one Authorization header", text, 1, true)
        assert.is_nil(text:find("secret", 1, true))
      end
      for _, row in ipairs(H.json(base .. "/api/queues", 200, { token = READ })) do
        assert.is_false(row.paused, row.name)
      end
      H.json(base .. "/api/queues/mail/pause", 200, { body = "{}", token = WRITE })
    end)

    it("a secret a client put in the URL's query never reaches the write log", function()
      local base = start(env)
      H.json(base .. "/api/jobs?access_token=" .. WRITE, 201, { token = PUSH,
        body = '{"name":"deploy","queue":"deploys"}' })
      H.json(base .. "/api/queues/mail/pause?" .. WRITE .. "&x=1", 200, { token = WRITE,
        body = "{}" })
      H.json(base .. "/api/bulk/cancel?queue=deploys&state=queued", 200, { token = WRITE,
        method = "POST" })
      local log = jr.wait_for(function()
        local l = env:log()
        return l:find("bulk_cancel", 1, true) and l
      end, 10, "the bulk cancel's log line")
      for _, s in ipairs({ READ, WRITE, PUSH }) do
        assert.is_nil(log:find(s, 1, true), "a secret in the log")
      end
      assert.matches("http: token 'ci' (push): POST /api/jobs (1 parameter not shown): " ..
        "push, to queue deploys", log, 1, true)
      assert.matches("http: token 'ops' (write): POST /api/queues/mail/pause (2 parameters " ..
        "not shown): pause, queue 'mail'", log, 1, true)
      assert.matches("http: token 'ops' (write): POST /api/bulk/cancel?queue=deploys&" ..
        "state=queued: bulk_cancel, queue 'deploys'", log, 1, true)
    end)
  end)
end
