-- tracing_spec.lua - OpenTelemetry traces (docs/tracing.md): the trace
-- context each producer gives is stored on the job, and the runner's spans
-- reach a real OTLP/HTTP receiver (spec/otlp/receiver.js, which checks
-- each request with the official opentelemetry-proto definitions) in the
-- right trace with the right parents; a retry is linked to its first
-- attempt; a collector down or refusing delays no job and its drops are
-- counted on /metrics.
local jr = require "jr"
local jrhttp = require "jrhttp"
local otlp = require "otlp"
local cjson = require "cjson"

local TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
local TRACE = "0af7651916cd43dd8448eb211c80319c"
local PARENT = "b7ad6b7169203331"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " tracing:", function()
    local env = jr.test_env(backend)

    it("stores each producer's context and refuses a malformed one", function()
      -- CLI: TRACEPARENT / TRACESTATE
      local out, err, code = env:cli("push", "a")
      assert.equal(0, code, err)
      local plain = tonumber(out:match("%d+"))
      out, err, code = jr.sh(("cd %s && TRACEPARENT=%s TRACESTATE=k=v %s -c %s push a")
        :format(jr.quote(env.dir), TP, jr.quote(jr.bin), jr.quote(env.config_file)))
      assert.equal(0, code, err)
      local cli = tonumber(out:match("%d+"))
      for _, bad in ipairs({ TP:upper(), TP:sub(1, 54), "01" .. TP:sub(3),
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01" }) do
        out, err, code = jr.sh(("cd %s && TRACEPARENT=%s %s -c %s push a")
          :format(jr.quote(env.dir), jr.quote(bad), jr.quote(jr.bin),
                  jr.quote(env.config_file)))
        assert.equal(2, code, bad)
        assert.truthy(err:find("TRACEPARENT", 1, true), err)
        assert.truthy(err:find("traceparent '", 1, true), err)
      end
      -- the Lua module: an option
      local client = jr.client(env)
      local lua = client:push("a", {}, { traceparent = TP, tracestate = "x=1" })
      local none, e = client:push("a", {}, { traceparent = "00-xyz" })
      assert.is_nil(none)
      assert.truthy(tostring(e):find("traceparent '00-xyz' is not 55", 1, true), e)
      none, e = client:push("a", {}, { tracestate = "x=1" })
      assert.is_nil(none)
      assert.truthy(tostring(e):find("a tracestate needs a traceparent", 1, true), e)
      client:close()
      -- the SQL function (PostgreSQL's producer in SQL)
      local sql
      if backend == "postgres" then
        sql = env:query(("SELECT push('a', traceparent => '%s') AS id")
          :format(TP))[1].id
        local okq = pcall(env.query, env, ("SELECT push('a', traceparent => '%s') AS id")
          :format(TP:upper()))
        assert.is_false(okq)
      end
      local function trace_of(id)
        local t = env:query("SELECT trace FROM jobs WHERE id = " .. id)[1].trace
        if t ~= cjson.null then return t end
      end
      assert.is_nil(trace_of(plain))
      assert.equal(TP .. " k=v", trace_of(cli))
      assert.equal(TP .. " x=1", trace_of(lua))
      if sql then assert.equal(TP, trace_of(sql)) end
    end)

    it("puts the HTTP push, the queue wait, the run, a span and the call in one trace; a follow-up push too", function()
      local base, out = otlp.start(env, finally)
      env:script("traced", ([[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          jobrunner.progress(1, 2, "half")
          jobrunner.span("fetch", function()
            local r = assert(jobrunner.http{ url = %q })
            assert(r.status == 200)
          end)
          jobrunner.push("child", {})
        end }]]):format(base .. "/callee"))
      -- the follow-up runs in a coroutine (inflight > 1): its call too
      -- carries its span
      env:script("child", ([[
        local jobrunner = require "jobrunner"
        return { inflight = 4, handle = function()
          assert(jobrunner.http{ url = %q }.status == 200)
        end }]]):format(base .. "/callee?co=1"))
      local url = jrhttp.start(env, ('tracing = { endpoint = %q, sample = 0, headers = { ["x-test"] = "yes" } }'):format(base))
      local code, body = jrhttp.req(url .. "/api/jobs", { token = true,
        body = '{"name": "traced"}', headers = { "traceparent: " .. TP,
        "tracestate: vendor=1" } })
      assert.equal(201, code, body)
      local id = cjson.decode(body).id
      local ok, got = pcall(otlp.wait_spans, out,
                            otlp.of_job(id, "process default"), 1, "run span")
      assert(ok, tostring(got) .. "\n" .. env:log() .. table.concat(jr.lines(out), "\n"))
      local run = got[1]
      -- attempt 1: a child of the producer's span, in its trace (sample 0
      -- does not apply: the producer's sampled flag does)
      assert.equal(TRACE, run.traceId)
      assert.equal(PARENT, run.parentSpanId)
      assert.equal(5, run.kind)            -- CONSUMER
      assert.equal("traced", run.attributes["jobrunner.job.name"])
      assert.equal(1, run.attributes["jobrunner.job.attempt"])
      assert.equal("completed", run.attributes["jobrunner.job.outcome"])
      assert.equal("process", run.attributes["messaging.operation.type"])
      assert.equal("jobrunner", run.service)
      local all = otlp.wait_spans(out, function(s) return s.traceId == TRACE end, 4,
                             "wait, run, fetch spans and the child's run")
      local function find(name, parent, job)
        for _, s in ipairs(all) do
          if s.name == name and s.parentSpanId == parent and
             (job == nil or s.attributes["jobrunner.job.name"] == job) then
            return s
          end
        end
      end
      local wait = assert(find("wait default", run.spanId), "the queue wait span")
      assert.truthy(wait.start <= run.start)
      assert.truthy(find("fetch", run.spanId), "jobrunner.span's span")
      local fetch = find("fetch", run.spanId)
      -- the follow-up push: its run a child of the attempt that pushed it
      local child = find("process default", run.spanId, "child")
      assert.truthy(child, "the follow-up's run")
      -- the callee got the traceparent of the span the call was made in
      local callee, cocallee
      for _, x in ipairs(otlp.records(out)) do
        if x.callee ~= nil and x.co then cocallee = x
        elseif x.callee ~= nil then callee = x end
      end
      assert.equal("00-" .. TRACE .. "-" .. fetch.spanId .. "-01", callee.callee)
      assert.equal("vendor=1", callee.tracestate)
      assert.equal("00-" .. TRACE .. "-" .. child.spanId .. "-01", cocallee.callee)
      local progress
      for _, e in ipairs(run.events) do
        if e.name == "progress" then progress = e end
      end
      assert.truthy(progress, "a progress event")
      -- the configured header went with each request, OTLP/protobuf by
      -- default (the receiver decoded it and encoded it back to its bytes)
      for _, x in ipairs(otlp.records(out)) do
        if x.batch then
          assert.equal("yes", x.header)
          assert.equal("application/x-protobuf", x.type)
        end
      end
      -- counted when the collector's answer is back, which may come
      -- after the receiver wrote down what it took
      jr.wait_for(function()
        local _, m = jrhttp.req(url .. "/metrics", { token = true })
        return tonumber(m:match("jobrunner_spans_exported_total (%d+)")) >= 4
      end, 20, "4 spans counted as exported")
      assert.equal(0, env:stop())
    end)

    it("links a retry to its first attempt, samples a job with no context, and times errors", function()
      local base, out = otlp.start(env, finally)
      env:script("flaky", [[
        return { max_retries = 1, backoff = 0, handle = function(job)
          if job.attempt == 1 then error("first try fails: \"q\"\n caf\u{e9}") end
        end }]])
      env:config(otlp.tracing(base, "sample = 1"))
      env:start()
      local id = env:push("flaky", "{}", "--key", "acct-7")
      local runs = otlp.wait_spans(out, otlp.of_job(id), 2, "two attempts")
      table.sort(runs, function(a, b) return a.attributes["jobrunner.job.attempt"] < b.attributes["jobrunner.job.attempt"] end)
      local first, second = runs[1], runs[2]
      assert.equal(1, first.attributes["jobrunner.job.attempt"])
      assert.is_nil(first.parentSpanId)               -- a root: no context
      assert.equal(2, first.status.code)              -- ERROR
      assert.truthy(first.status.message:find('first try fails: "q"\n caf\u{e9}', 1, true),
                    first.status.message)
      assert.equal("retry", first.attributes["jobrunner.job.outcome"])
      assert.equal("acct-7", first.attributes["jobrunner.job.key"])
      assert.equal(2, second.attributes["jobrunner.job.attempt"])
      assert.are_not.equal(first.traceId, second.traceId)
      assert.same({ { traceId = first.traceId, spanId = first.spanId } }, second.links)
      assert.equal(0, env:stop())
    end)

    it("passes an unsampled job's context on: ids derived as a sampled one's, the flag unset", function()
      local base, out = otlp.start(env, finally)
      -- the call names the job and its created_at's bits (the ids'
      -- inputs); co=1 marks the job pushed with a context
      env:script("quiet", ([[
        local jobrunner = require "jobrunner"
        return function(job)
          local bits = string.unpack("<i8", string.pack("<d", job.created_at))
          assert(jobrunner.http{ url = %q .. ("?id=%%d&c=%%d%%s"):format(
            job.id, bits, job.payload.co and "&co=1" or "") }.status == 200)
        end]]):format(base .. "/callee"))
      env:config(otlp.tracing(base, "sample = 0"))
      env:start()
      local own = env:push("quiet", "{}")
      local _, err, code = jr.sh(("cd %s && TRACEPARENT=%s %s -c %s push quiet '{\"co\": true}'")
        :format(jr.quote(env.dir), TP:sub(1, 53) .. "00", jr.quote(jr.bin),
                jr.quote(env.config_file)))
      assert.equal(0, code, err)
      local got = jr.wait_for(function()
        local r = {}
        for _, x in ipairs(otlp.records(out)) do
          if x.callee ~= nil then r[x.co and "ctx" or "own"] = x end
        end
        return r.own and r.ctx and r
      end, 30, "both calls")
      -- docs/tracing.md's rule (trace.c): splitmix64 over the job's words
      local function mix(x)
        x = x + 0x9e3779b97f4a7c15
        x = (x ~ (x >> 30)) * 0xbf58476d1ce4e5b9
        x = (x ~ (x >> 27)) * 0x94d049bb133111eb
        return x ~ (x >> 31)
      end
      local function derive(n, a, b, c)
        local t = {}
        for k = 1, n // 8 do
          local v = mix(mix(mix(a ~ k) ~ b) ~ c)
          for _ = 1, 8 do t[#t + 1] = ("%02x"):format(v & 0xff); v = v >> 8 end
        end
        return table.concat(t)
      end
      local function word(hex) return math.tointeger(tonumber("0x" .. hex)) end
      local id = tonumber(got.own.url:match("id=(%d+)"))
      local bits = math.tointeger(tonumber(got.own.url:match("c=(%-?%d+)")))
      assert.equal(own, id)
      local trace = derive(16, own, bits, 0x7472616365)
      local span = derive(8, word(trace:sub(1, 16)), word(trace:sub(17)) ~ own, 1)
      assert.equal("00-" .. trace .. "-" .. span .. "-00", got.own.callee)
      -- with a producer's unsampled context: its trace, a span of the
      -- job's, the flag unset
      assert.truthy(got.ctx.callee:match("^00%-" .. TRACE .. "%-%x+%-00$"),
                    got.ctx.callee)
      assert.are_not.equal(PARENT, got.ctx.callee:sub(37, 52))
      assert.equal(0, env:stop())
    end)

    it("drops and counts spans when the collector refuses or is gone; no job waits", function()
      local base, out = otlp.start(env, finally, "500")
      env:script("quick", "return function() end")
      -- a port nothing listens on, then the receiver answering 500
      -- credentials in the endpoint never reach the log
      local url = jrhttp.start(env, ('concurrency = 2, tracing = { endpoint = %q, sample = 1, queue = 4 }')
        :format((base:gsub("^http://", "http://user:s3cret@"))))
      local ids = {}
      for i = 1, 20 do
        local code, body = jrhttp.req(url .. "/api/jobs", { token = true,
          body = '{"name": "quick"}', headers = { "traceparent: " .. TP } })
        assert.equal(201, code, body)
        ids[i] = cjson.decode(body).id
      end
      jr.wait_for(function() return env:idle() end,
                  30, "jobs done")
      local dropped = jr.wait_for(function()
        local _, m = jrhttp.req(url .. "/metrics", { token = true })
        local d = tonumber(m:match("jobrunner_spans_dropped_total (%d+)"))
        return d and d >= 40 and d
      end, 30, "spans dropped")
      assert.truthy(dropped >= 40)
      local refused = 0
      for _, x in ipairs(otlp.records(out)) do
        if x.refused then refused = refused + 1 end
      end
      assert.truthy(refused >= 1)
      -- the collector never answers: the jobs still run at once, and the
      -- queue (tracing.queue = 4 spans) holds no more than it may: the
      -- rest of the 20 spans are dropped while a request hangs
      jr.sh(("curl -s -X POST --data-binary slow %s/mode"):format(base))
      local t0 = jr.now()
      for _ = 1, 10 do env:push("quick", "{}", "--queue", "default") end
      jr.wait_for(function() return env:idle() end,
                  30, "jobs done with a silent collector")
      assert.truthy(jr.now() - t0 < 20)
      jr.wait_for(function()
        local _, m = jrhttp.req(url .. "/metrics", { token = true })
        local d = tonumber(m:match("jobrunner_spans_dropped_total (%d+)"))
        return d and d >= dropped + 12
      end, 30, "spans dropped with the queue full")
      -- the log says so, once a minute, with no credentials in it
      assert.truthy(env:log():find("tracing: %d+ spans? dropped"), env:log())
      assert.truthy(env:log():find("http://***@127.0.0.1:", 1, true), env:log())
      assert.falsy(env:log():find("s3cret", 1, true), env:log())
      assert.equal(0, env:stop())
      -- the spans the full queue dropped are said too, by the stop at the
      -- latest
      assert.truthy(env:log():find("tracing: %d+ spans? dropped: the export queue was full " ..
                                   "%(tracing.queue = 4;"), env:log())
    end)

    it("refuses a bad tracing table, naming the key", function()
      local cases = {
        { 'tracing = { sample = 0.5 }', "tracing.endpoint" },
        { 'tracing = { endpoint = "ftp://x" }', "tracing.endpoint" },
        { 'tracing = { endpoint = "http://c:4318", sample = 2 }', "tracing.sample" },
        { 'tracing = { endpoint = "http://c:4318", headers = { ["bad name"] = "v" } }', "tracing.headers.bad name" },
        { 'tracing = { endpoint = "http://c:4318", headers = { k = "a\\nb" } }', "tracing.headers.k" },
        { 'tracing = { endpoint = "http://c:4318", rate = 1 }', "tracing.rate" },
        { 'tracing = { endpoint = "http://c:4318", queue = 0 }', "tracing.queue" },
        { 'tracing = { endpoint = "http://c:4318", protocol = "grpc" }', 'tracing.protocol\' must be "protobuf" or "json"' },
        { 'tracing = { endpoint = "http://c:4318", protocol = 1 }', "tracing.protocol" },
      }
      for _, c in ipairs(cases) do
        env:config(c[1])
        local _, err, code = env:cli("check")
        assert.are_not.equal(0, code, c[1])
        assert.truthy(err:find(c[2], 1, true), c[1] .. ": " .. err)
        assert.truthy(err:find("jobrunner.lua:", 1, true), err)
      end
    end)
  end)
end
