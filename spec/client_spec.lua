-- client_spec: require "jobrunner" (build/jobrunner.so), the producer
-- library as Lua sees it, on every backend: push, push_many, options as
-- stored, stats, errors, exact integers, and a runner picking a push up.
local cjson = require "cjson"
local h = require "jr"
local jr = require "jobrunner"

for _, backend in ipairs(h.backends()) do
  describe(backend .. ": require 'jobrunner'", function()
    local env, q

    -- A client on env's database (and schema, on PostgreSQL).
    local function open(opts)
      opts = opts or {}
      opts.schema = env.schema
      return assert(jr.open(env.url, opts))
    end

    -- The stored payload decoded (PostgreSQL's jsonb text has spaces).
    local function payload(id)
      return cjson.decode(env:job(id).payload)
    end

    before_each(function()
      env = h.env(backend)
      q = open()
    end)

    after_each(function()
      q:close()
      env:cleanup()
    end)

    describe("push", function()
      it("stores a job and returns its id", function()
        local id = q:push("send_email", { to = "a@b" })
        assert.is_true(math.type(id) == "integer")
        local row = env:job(id)
        assert.equal("send_email", row.name)
        assert.same({ to = "a@b" }, payload(id))
        assert.equal("default", row.queue)
        assert.equal(0, row.priority)
        assert.equal("queued", row.state)
        assert.equal(cjson.null, row.max_retries)  -- NULL: the handler's
        assert.near(row.db_now, row.run_at, 5)
      end)

      it("stores {} for no payload and for an empty table", function()
        local a = q:push("hello")
        local b = q:push("hello", {})
        assert.equal("{}", env:job(a).payload)
        assert.equal("{}", env:job(b).payload)
      end)

      it("stores the options", function()
        local id = q:push("send_email", { to = "a@b" },
          { run_in = 60, priority = 5, queue = "mail", max_retries = 3 })
        local row = env:job(id)
        assert.equal(5, row.priority)
        assert.equal("mail", row.queue)
        assert.equal(3, row.max_retries)
        assert.near(row.db_now + 60, row.run_at, 5)
      end)

      it("stores run_at as given", function()
        local at = os.time() + 3600
        local id = q:push("hello", nil, { run_at = at })
        assert.near(at, env:job(id).run_at, 0.01)
      end)

      it("accepts max_retries = 0 (never retry)", function()
        local id = q:push("hello", nil, { max_retries = 0 })
        assert.equal(0, env:job(id).max_retries)
      end)

      it("encodes arrays, objects, null, booleans and floats", function()
        local id = q:push("hello", { list = { 1, 2, 3 }, empty = jr.array(),
          obj = {}, n = jr.null, yes = true, f = 0.5, s = "é\n\"" })
        assert.same({ list = { 1, 2, 3 }, empty = {}, obj = {},
          n = cjson.null, yes = true, f = 0.5, s = "é\n\"" }, payload(id))
        local text = env:job(id).payload
        assert.matches('"empty": ?%[%]', text)
        assert.matches('"obj": ?{}', text)
      end)

      it("keeps integers exact: 2^53+1 and math.maxinteger", function()
        local id = q:push("hello", { a = (1 << 53) + 1, b = math.maxinteger,
          c = math.mininteger, d = { -(1 << 53) - 1 } })
        local text = env:job(id).payload
        assert.truthy(text:find("9007199254740993", 1, true), text)
        assert.truthy(text:find("9223372036854775807", 1, true), text)
        assert.truthy(text:find("-9223372036854775808", 1, true), text)
        assert.truthy(text:find("-9007199254740993", 1, true), text)
      end)

      it("is usable with <close> and closes on scope exit", function()
        local outer
        do
          local c <close> = open()
          outer = c
          assert.is_number(c:push("hello"))
        end
        assert.equal("jobrunner.client (closed)", tostring(outer))
        assert.has_error(function() outer:push("hello") end,
          "client is closed")
      end)

      it("opens from a config file", function()
        local c = assert(jr.open(env.config_file))
        local id = c:push("hello", { via = "config" })
        c:close()
        assert.same({ via = "config" }, payload(id))
      end)
    end)

    describe("push_many", function()
      it("pushes every job in order and returns the ids", function()
        local ids = q:push_many {
          { "a", { x = 1 } },
          { "b", nil, { priority = 1 } },
          { "c", {}, { queue = "q2", run_in = 30 } },
        }
        assert.equal(3, #ids)
        assert.is_true(ids[1] < ids[2] and ids[2] < ids[3])
        assert.same({ x = 1 }, payload(ids[1]))
        assert.equal(1, env:job(ids[2]).priority)
        assert.equal("q2", env:job(ids[3]).queue)
        assert.equal("b", env:job(ids[2]).name)
      end)

      it("returns {} for an empty list", function()
        assert.same({}, q:push_many {})
      end)

      it("inserts nothing when one job is bad", function()
        local ids, err = q:push_many {
          { "a", { x = 1 } },
          { "bad name", {} },
        }
        assert.is_nil(ids)
        assert.matches("job 2 of 2: invalid job name 'bad name'", err)
        ids, err = q:push_many { { "a" }, { "b", { f = print } } }
        assert.is_nil(ids)
        assert.matches("job 2 %(b%): payload.f: cannot encode a function", err)
        assert.equal(0, env:count())
      end)

      it("raises on a malformed list", function()
        assert.has_error(function() q:push_many { "a" } end,
          "push_many: item 1 must be a table {name, payload, opts}, got string")
        assert.has_error(function() q:push_many { { 42 } } end,
          "push_many: item 1: name (item[1]) must be a string, got number")
        assert.has_error(function() q:push_many { { "a", {}, { when = 1 } } } end)
      end)
    end)

    describe("stats", function()
      it("counts per state and per name", function()
        q:push("a")
        q:push("a", nil, { run_in = 3600 })
        q:push("b")
        local s = q:stats()
        assert.same({ queued = 3, ready = 2, scheduled = 1, running = 0,
          dead = 0 }, { queued = s.queued, ready = s.ready,
          scheduled = s.scheduled, running = s.running, dead = s.dead })
        assert.same({ queued = 2, ready = 1, scheduled = 1, running = 0,
          dead = 0 }, s.names.a)
        assert.equal(1, s.names.b.ready)
      end)

      it("counts dead jobs", function()
        local id = q:push("a")
        env:exec("UPDATE jobs SET state = 'dead' WHERE id = " .. id)
        local s = q:stats()
        assert.equal(1, s.dead)
        assert.equal(0, s.queued)
      end)
    end)

    describe("errors", function()
      it("returns nil, message for a bad name or queue", function()
        local id, err = q:push("bad name")
        assert.is_nil(id)
        assert.matches("invalid job name 'bad name'", err)
        id, err = q:push("a", {}, { queue = "no/slash" })
        assert.is_nil(id)
        assert.matches("invalid queue name 'no/slash'", err)
        id, err = q:push(("x"):rep(200))
        assert.is_nil(id)
        assert.matches("at most 128", err)
      end)

      it("returns nil, 'payload: ...' for what JSON cannot hold", function()
        local cyclic = { a = {} }
        cyclic.a.back = cyclic
        local cases = {
          { print, "job 'a': payload: must be a table or nil, got function" },
          { { f = print }, "payload.f: cannot encode a function" },
          { { co = coroutine.create(print) }, "payload.co: cannot encode a thread" },
          { { io.stdout }, "payload%[1%]: cannot encode a userdata" },
          { cyclic, "payload.a.back: cyclic table" },
          { { x = 0 / 0 }, "payload.x: cannot encode NaN" },
          { { x = math.huge }, "payload.x: cannot encode an infinity" },
          { { 1, 2, k = 3 }, "payload: table mixes string keys and array indexes" },
          { { [1.5] = 1 }, "payload: cannot encode key 1.5" },
          { { [true] = 1 }, "payload: cannot encode key true" },
          { { [0] = 1 }, "payload: cannot encode key 0" },
          { { [1000] = 1 }, "payload: excessively sparse array" },
          { { s = "\xff" }, "payload.s: string is not valid UTF%-8" },
        }
        for _, c in ipairs(cases) do
          local id, err = q:push("a", c[1])
          assert.is_nil(id)
          assert.matches(c[2], err)
        end
        assert.equal(0, env:count())
      end)

      it("lets a shared (not cyclic) table appear twice", function()
        local shared = { 1 }
        local id = assert(q:push("a", { x = shared, y = shared }))
        assert.same({ x = { 1 }, y = { 1 } }, payload(id))
      end)

      it("refuses a payload over max_payload", function()
        local small = open({ max_payload = 16 })
        local id, err = small:push("a", { text = ("x"):rep(100) })
        small:close()
        assert.is_nil(id)
        assert.matches("job 'a': payload of %d+ bytes is over the limit of 16", err)
      end)

      it("refuses run_at together with run_in", function()
        local id, err = q:push("a", {}, { run_at = os.time(), run_in = 5 })
        assert.is_nil(id)
        assert.matches("give run_at or run_in, not both", err)
      end)

      it("raises on misuse", function()
        assert.has_error(function() q:push() end)
        assert.has_error(function() q:push({}) end)
        assert.has_error(function() q:push("a", {}, { prio = 1 }) end,
          "push: unknown option 'prio' (valid: run_in, run_at, priority, queue, max_retries, unique_key, unique_for, on_conflict, key, result_ttl, after, on_parent_failure, batch, sequence, on_failure, expires_in, expires_at, deadline, traceparent, tracestate, cost)")
        assert.has_error(function() q:push("a", {}, { priority = "high" }) end,
          "push: option 'priority' must be an integer, got string")
        assert.has_error(function() q:push("a", {}, { priority = 1.5 }) end,
          "push: option 'priority' must be an integer, got a float")
        assert.has_error(function() q:push("a", {}, { max_retries = -1 }) end)
        assert.has_error(function() q:push("a", {}, "opts") end)
        assert.has_error(function() jr.open("sqlite:x.db", { schemas = "x" }) end,
          "open: unknown option 'schemas' (valid: schema, busy_timeout, max_payload, key_file)")
        assert.has_error(function() q.push(io.stdout, "a") end)
      end)

      it("raises 'client is closed' after close; close twice is fine", function()
        local c = open()
        assert.is_true(c:close())
        assert.is_true(c:close())
        assert.has_error(function() c:push("a") end, "client is closed")
        assert.has_error(function() c:stats() end, "client is closed")
      end)
    end)
  end)
end

describe("jr.open errors", function()
  it("returns nil, message for a bad URL", function()
    local c, err = jr.open("mysql://localhost/db")
    assert.is_nil(c)
    assert.matches("unknown backend URL 'mysql://localhost/db'", err)
    c, err = jr.open("")
    assert.is_nil(c)
    assert.matches("empty backend URL", err)
  end)

  it("returns nil, message for an unreachable SQLite file", function()
    local c, err = jr.open("sqlite:/nonexistent/dir/jobs.db")
    assert.is_nil(c)
    assert.matches("/nonexistent/dir/jobs.db", err, 1, true)
  end)

  it("returns nil, message for an unreachable PostgreSQL, password masked", function()
    local c, err = jr.open("postgresql://u:secret@127.0.0.1:1/db")
    assert.is_nil(c)
    assert.matches("cannot connect to PostgreSQL", err)
    assert.is_nil(err:find("secret", 1, true))
  end)

  it("returns nil, message for a broken config file", function()
    local path = os.tmpname() .. ".lua"
    h.write_file(path, "return { backend = 'sqlite:/tmp/x.db', bogus = 1 }\n")
    local c, err = jr.open(path)
    os.remove(path)
    assert.is_nil(c)
    assert.matches("bogus", err)
  end)
end)

describe("jr.encode", function()
  it("sorts object keys and writes floats that read back", function()
    assert.equal('{"a":1,"b":[true,false],"c":0.1}',
      jr.encode({ c = 0.1, b = { true, false }, a = 1 }))
    assert.equal("[1,null,3]", jr.encode({ 1, nil, 3 }))
    assert.equal("{}", jr.encode(nil))
  end)
end)

for _, backend in ipairs(h.backends()) do
  describe(backend .. ": a runner", function()
    local env = h.test_env(backend)

    it("runs what the Lua module pushed, payload intact", function()
      env:script("echo", [[
return function(job)
  local f = assert(io.open(job.payload.out, "w"))
  f:write(job.payload.word)
  f:close()
end]])
      env:start()
      local q = assert(jr.open(env.config_file))
      local out = env.dir .. "/echo.out"
      assert(q:push("echo", { out = out, word = "pushed from Lua" }))
      q:close()
      h.wait_for(function() return env:count() == 0 end, 20, "job done")
      assert.equal("pushed from Lua", h.read_file(out))
    end)
  end)
end
