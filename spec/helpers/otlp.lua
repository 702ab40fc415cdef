-- otlp.lua - spec/otlp/receiver.js, the OTLP/HTTP receiver the tracing
-- specs send spans to: it checks each request with the official
-- opentelemetry-proto definitions and writes one JSON line per span (or
-- {"invalid": why} per request it refused) to a file.
--
--   local otlp = require "otlp"
--   local base, out = otlp.start(env, finally)  -- killed at its end
--   env:config(otlp.tracing(base, "sample = 1"))
--   local s = otlp.wait_spans(out, otlp.of_job(id), 2, "two attempts")
local jr = require "jr"
local cjson = require "cjson"
local assert = require "luassert"

local M = {}

-- The receiver's modules are installed (make deps).
function M.have_receiver()
  local f = io.open(jr.root .. "/spec/otlp/node_modules/@opentelemetry/" ..
                    "otlp-transformer/package.json")
  if f then f:close() end
  return f ~= nil
end

-- Starts the receiver in env's dir, answering as mode says ("ok", the
-- default, or a status such as "500"; its GET /callee records the trace
-- headers it got). finally is the test's own (busted gives it to the test,
-- not to a module): the receiver is killed when the test ends, whatever
-- its end, and before the env's cleanup. Returns its base URL and its
-- lines file.
function M.start(env, finally, mode)
  assert.is_truthy(M.have_receiver(),
                   "spec/otlp's receiver is not installed: run make deps")
  local out, pidf = env.dir .. "/otlp.jsonl", env.dir .. "/otlp.pid"
  os.execute(("cd %s && (node receiver.js 0 %s %s >%s 2>&1 & echo $! > %s)")
    :format(jr.quote(jr.root .. "/spec/otlp"), jr.quote(out), mode or "ok",
            jr.quote(env.dir .. "/otlp.log"), jr.quote(pidf)))
  local pid = jr.wait_for(function()
    local f = io.open(pidf)
    local s = f and f:read("a")
    if f then f:close() end
    return s and tonumber(s:match("%d+"))
  end, 10, "receiver pid")
  finally(function()
    os.execute("kill " .. pid .. " 2>/dev/null")
  end)
  local port = jr.wait_for(function()
    for _, l in ipairs(jr.lines(out)) do
      local p = l:match('"listening":(%d+)')
      if p then return p end
    end
  end, 20, "receiver listening")
  return "http://127.0.0.1:" .. port, out
end

-- The config's tracing table sending to base, with more fields (Lua
-- text, e.g. 'sample = 1, protocol = "json"') when given.
function M.tracing(base, more)
  return ("tracing = { endpoint = %q%s }"):format(base,
    more and ", " .. more or "")
end

-- Every line the receiver wrote, decoded.
function M.records(out)
  local r = {}
  for _, l in ipairs(jr.lines(out)) do r[#r + 1] = cjson.decode(l) end
  return r
end

-- The spans received so far that pred takes (all with no pred); fails on
-- a request the receiver refused.
function M.spans(out, pred)
  local r = {}
  for _, x in ipairs(M.records(out)) do
    assert.is_nil(x.invalid, "the receiver refused a request: " ..
                  tostring(x.invalid))
    if x.spanId and (pred == nil or pred(x)) then r[#r + 1] = x end
  end
  return r
end

-- Waits (30 s at most) for n spans (1 by default) that pred takes.
function M.wait_spans(out, pred, n, what)
  return jr.wait_for(function()
    local s = M.spans(out, pred)
    return #s >= (n or 1) and s
  end, 30, what)
end

-- A pred: the spans of job id (its messaging.message.id), of name too
-- when given.
function M.of_job(id, name)
  local want = tostring(math.tointeger(tonumber(id)))
  return function(s)
    return s.attributes["messaging.message.id"] == want and
           (name == nil or s.name == name)
  end
end

return M
