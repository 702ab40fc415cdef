-- tracing_flow_spec.lua - flows and batch callbacks in their producer's
-- trace (docs/tracing.md, "Flows and batch callbacks"): a flow pushed
-- over HTTP with a traceparent stores it on each of its jobs, and the
-- runs of its parent, its child and its batch's callback reach a real
-- OTLP/HTTP receiver (spec/otlp/receiver.js) as children of the
-- producer's span, in its trace; push-flow takes TRACEPARENT, a job of
-- the flow its own traceparent, the Lua module's q:flow and q:batch
-- theirs.
local jr = require "jr"
local jrhttp = require "jrhttp"
local otlp = require "otlp"
local cjson = require "cjson"

local TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
local TRACE = "0af7651916cd43dd8448eb211c80319c"
local PARENT = "b7ad6b7169203331"
local TP2 = "00-11111111111111111111111111111111-2222222222222222-01"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " tracing, flows:", function()
    local env = jr.test_env(backend)

    local function trace_of(id)
      local t = env:query("SELECT trace FROM jobs WHERE id = " .. id)[1].trace
      if t ~= cjson.null then return t end
    end

    it("puts a flow pushed over HTTP, its child and its batch's callback in the producer's trace", function()
      local base, out = otlp.start(env, finally)
      for _, n in ipairs({ "fa", "fb", "fdone" }) do
        env:script(n, "return function() end")
      end
      -- sample 0: the producer's sampled flag decides, as for a push;
      -- the spans as OTLP/JSON (tracing.protocol), the other encoding
      local url = jrhttp.start(env, otlp.tracing(base, 'sample = 0, protocol = "json"'))
      local code, body = jrhttp.req(url .. "/api/flows", { token = true,
        body = [[{"jobs": [{"ref": "a", "name": "fa"},
                           {"ref": "b", "name": "fb", "after": ["a"]}],
                  "batch": {"on_complete": "fdone"}}]],
        headers = { "traceparent: " .. TP, "tracestate: vendor=1" } })
      assert.truthy(code >= 200 and code < 300, body)
      local ok, got = pcall(jr.wait_for, function()
        local s = otlp.spans(out, function(x)
          return x.name == "process default" end)
        return #s >= 3 and s
      end, 30, "the runs of fa, fb and fdone")
      assert(ok, tostring(got) .. "\n" .. env:log() .. table.concat(jr.lines(out), "\n"))
      local runs = {}
      for _, s in ipairs(got) do runs[s.attributes["jobrunner.job.name"]] = s end
      for _, n in ipairs({ "fa", "fb", "fdone" }) do
        assert.truthy(runs[n], n .. "'s run")
        assert.equal(TRACE, runs[n].traceId, n)
        assert.equal(PARENT, runs[n].parentSpanId, n)
      end
      for _, l in ipairs(jr.lines(out)) do
        local x = cjson.decode(l)
        if x.batch then assert.equal("application/json", x.type) end
      end
      assert.equal(0, env:stop())
    end)

    it("takes push-flow's TRACEPARENT, a job's own, and the Lua module's", function()
      local f = env.dir .. "/flow.json"
      jr.write_file(f, ([[{"jobs": [{"ref": "a", "name": "fa"},
        {"ref": "b", "name": "fb", "after": ["a"], "traceparent": %q}],
        "batch": {"on_complete": "fdone"}}]]):format(TP2))
      local out, err, code = jr.sh(("cd %s && TRACEPARENT=%s %s -c %s push-flow %s")
        :format(jr.quote(env.dir), TP, jr.quote(jr.bin),
                jr.quote(env.config_file), jr.quote(f)))
      assert.equal(0, code, err)
      local a = tonumber(out:match("a (%d+)"))
      local b = tonumber(out:match("b (%d+)"))
      assert.equal(TP, trace_of(a))
      assert.equal(TP2, trace_of(b))           -- its own wins
      -- a bad one is refused, naming the job, and nothing is pushed
      local before = #env:query("SELECT id FROM jobs")
      out, err, code = jr.sh(("cd %s && TRACEPARENT=00-xyz %s -c %s push-flow %s")
        :format(jr.quote(env.dir), jr.quote(jr.bin),
                jr.quote(env.config_file), jr.quote(f)))
      assert.are_not.equal(0, code)
      assert.truthy(err:find("flow: job 'a'", 1, true), err)
      assert.truthy(err:find("traceparent '00-xyz'", 1, true), err)
      assert.equal(before, #env:query("SELECT id FROM jobs"))
      -- the Lua module: a flow's job and a batch's member give theirs
      local client = jr.client(env)
      local ids = assert(client:flow({ jobs = {
        { ref = "x", name = "fa", traceparent = TP, tracestate = "k=v" } } }))
      assert.equal(TP .. " k=v", trace_of(ids.x))
      local _, members = assert(client:batch(function(bt)
        bt:push("fa", {}, { traceparent = TP2 })
      end, { on_complete = "fdone" }))
      assert.equal(TP2, trace_of(members[1]))
      client:close()
    end)
  end)
end
