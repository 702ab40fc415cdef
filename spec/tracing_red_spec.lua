-- tracing_red_spec.lua - tracing (docs/tracing.md) against careless and
-- hostile input: an endpoint whose port or host is wrong is refused by
-- check, with no user:password in the message; a header's bad value
-- is named by its type; POST /api/jobs keeps a good traceparent when the
-- request's tracestate is malformed (W3C Trace Context: a tracestate's
-- failure must not affect the traceparent) and joins several tracestate
-- headers into one list; a handler's jobrunner.http call giving its own
-- tracestate header sends that one alone, not the job's beside it; a
-- jobrunner.span still open when its coroutine job times out or is
-- cancelled is sent, failed, not lost (one left in a coroutine of the
-- handler's own ends with its job); a reload that changes the
-- tracing table says it takes a restart.
local jr = require "jr"
local jrhttp = require "jrhttp"
local otlp = require "otlp"
local cjson = require "cjson"

local TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " tracing, red team:", function()
    local env = jr.test_env(backend)

    if backend == "sqlite" then   -- the config's checks need no database
      it("refuses an endpoint with no host or a bad port, credentials masked", function()
        local cases = {
          { "http://c:99999", "has a port that is not a number from 1 to 65535" },
          { "http://c:0", "has a port" },
          { "http://c:-1", "has a port" },
          { "http://c:", "has a port" },
          { "http://c:80x/v", "has a port" },
          { "http://user:s3cret@c:70000", "'http://***@c:70000' has a port" },
          { "http://user:s3cret@:4318", "'http://***@:4318' names no host" },
          { "http://:4318", "names no host" },
          { "ftp://user:s3cret@c", "'ftp://***@c' is not an http://" },
        }
        for _, c in ipairs(cases) do
          env:config(('tracing = { endpoint = %q }'):format(c[1]))
          local _, err, code = env:cli("check")
          assert.are_not.equal(0, code, c[1])
          assert.truthy(err:find("tracing.endpoint", 1, true), c[1] .. ": " .. err)
          assert.truthy(err:find(c[2], 1, true), c[1] .. ": " .. err)
          assert.falsy(err:find("s3cret", 1, true), err)
        end
        for _, good in ipairs({ "http://c:1", "https://c:65535/otel",
                                "http://u:p@c", "http://[::1]:4318" }) do
          env:config(('tracing = { endpoint = %q }'):format(good))
          local _, err, code = env:cli("check")
          assert.equal(0, code, good .. ": " .. err)
        end
        env:config('tracing = { endpoint = "http://c", headers = { ["x-k"] = 5 } }')
        local _, err = env:cli("check")
        assert.truthy(err:find("tracing.headers.x-k' must be a string, got number", 1, true), err)
      end)

      it("warns when a reload changes the tracing table (it takes a restart)", function()
        env:script("a", "return function() end")
        local tracing = 'tracing = { endpoint = "http://127.0.0.1:9", sample = 1%s }'
        env:config(tracing:format(""))
        env:start()
        local function reloaded(n)
          env:signal("HUP")
          jr.wait_for(function()
            local _, k = env:log():gsub("reload: handlers unchanged", "")
            return k >= n
          end, 30, "reload " .. n)
        end
        reloaded(1)
        assert.falsy(env:log():find("tracing table changed", 1, true), env:log())
        env:config(tracing:format(', headers = { ["x-api-key"] = "k3y-s3cret" }'))
        reloaded(2)
        local log = env:log()
        assert.truthy(log:find("reload: the tracing table changed; the runner keeps " ..
                               "the one it started with until it is restarted", 1, true), log)
        assert.falsy(log:find("k3y-s3cret", 1, true), log)
        assert.equal(0, env:stop())
      end)
    end

    it("POST /api/jobs keeps the traceparent when the tracestate is bad, joins tracestates", function()
      env:script("a", "return function() end")
      local url = jrhttp.start(env)
      local function push(headers)
        local code, body = jrhttp.req(url .. "/api/jobs", { token = true,
          body = '{"name": "a", "run_at": 4000000000}', headers = headers })
        assert.equal(201, code, body)
        local t = env:query("SELECT trace FROM jobs WHERE id = " ..
                            cjson.decode(body).id)[1].trace
        return t ~= cjson.null and t or nil
      end
      assert.equal(TP, push({ "traceparent: " .. TP, "tracestate: k=\1v" }))
      assert.equal(TP, push({ "traceparent: " .. TP, "tracestate: k=é" }))
      assert.equal(TP, push({ "traceparent: " .. TP,
                              "tracestate: a=" .. ("b"):rep(600) }))
      assert.equal(TP .. " a=1,b=2", push({ "traceparent: " .. TP,
                                            "tracestate: a=1", "tracestate: b=2" }))
      assert.equal(TP, push({ "traceparent: " .. TP, "tracestate: a=" .. ("b"):rep(300),
                              "tracestate: c=" .. ("d"):rep(300) }))
      -- a bad traceparent still drops both
      assert.is_nil(push({ "traceparent: " .. TP:upper(), "tracestate: a=1" }))
      local log = env:log()
      assert.truthy(log:find("tracestate holds a byte 0x01", 1, true), log)
      assert.truthy(log:find("pushed with the traceparent alone", 1, true), log)
      assert.equal(0, env:stop())
    end)

    it("jobrunner.http sends the handler's own tracestate instead of the job's", function()
      local base, out = otlp.start(env, finally)
      env:script("call", ([[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          local h = job.payload.own and { TraceState = "mine=1" } or nil
          assert(jobrunner.http{ url = %q, headers = h }.status == 200)
        end }]]):format(base .. "/callee"))
      env:config()
      env:start()
      local cmd = ("cd %s && TRACEPARENT=%s TRACESTATE=v=1 %s -c %s push call %s")
      for _, payload in ipairs({ '{"own": true}', '{}' }) do
        local _, err, code = jr.sh(cmd:format(jr.quote(env.dir), TP, jr.quote(jr.bin),
          jr.quote(env.config_file), jr.quote(payload)))
        assert.equal(0, code, err)
      end
      local got = jr.wait_for(function()
        local r = {}
        for _, l in ipairs(jr.lines(out)) do
          local x = cjson.decode(l)
          if x.callee ~= nil then r[#r + 1] = x.tracestate end
        end
        return #r >= 2 and r
      end, 30, "two calls")
      table.sort(got)
      assert.same({ "mine=1", "v=1" }, got)
      assert.equal(0, env:stop())
    end)

    it("sends a span left open by a coroutine job timed out or cancelled, failed", function()
      local base, out = otlp.start(env, finally)
      env:script("stuck", [[
        local jobrunner = require "jobrunner"
        return { inflight = 2, max_retries = 0, timeout = 3, handle = function(job)
          if job.payload.t == "left" then   -- a coroutine of its own, never resumed
            coroutine.wrap(function()
              jobrunner.span("inner left", function() coroutine.yield() end)
            end)()
            return
          end
          jobrunner.span("outer " .. job.payload.t, function()
            jobrunner.span("inner " .. job.payload.t, function()
              jobrunner.sleep(600)
            end)
          end)
        end }]])
      env:config(otlp.tracing(base, "sample = 1"))
      env:start()
      env:push("stuck", '{"t": "timeout"}')
      env:push("stuck", '{"t": "left"}')
      local c = env:push("stuck", '{"t": "cancel"}')
      env:wait_state(c, "running", 30)
      local _, err, code = env:cli("cancel", tostring(c))
      assert.equal(0, code, err)
      local got = jr.wait_for(function()
        local r = {}
        for _, x in ipairs(otlp.spans(out)) do r[x.name] = x end
        return r["outer timeout"] and r["outer cancel"] and r["inner left"] and r
      end, 30, "the attempts' spans and their open ones")
      for _, t in ipairs({ "timeout", "cancel" }) do
        local outer, inner = got["outer " .. t], got["inner " .. t]
        assert.truthy(outer and inner, t)
        assert.equal(inner.parentSpanId and outer.spanId, inner.parentSpanId)
        assert.equal(2, outer.status.code)
        assert.equal(2, inner.status.code)
        assert.truthy(inner.status.message:find(t == "timeout" and "timed out"
                                                or "cancelled", 1, true), inner.status.message)
      end
      -- the job completed: its suspended span ends with it, not failed
      assert.is_not.equal(2, (got["inner left"].status or {}).code)
      assert.equal(0, env:stop())
    end)
  end)
end
