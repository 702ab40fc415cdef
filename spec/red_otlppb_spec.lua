-- red_otlppb_spec.lua - tracing's OTLP/protobuf export (docs/tracing.md,
-- `tracing.protocol`) against hostile text, on each backend: a UTF-8
-- OTEL_SERVICE_NAME reaches the collector as it is, as with the JSON (it
-- was '?' for each byte past ASCII), up to 255 bytes (one of 100 was
-- 'jobrunner', and quotes in one of 27 left the JSON's out); a handler's error text with invalid
-- UTF-8 (overlong forms, surrogates, code points past U+10FFFF, which
-- went out as they were and made the whole batch one the official
-- definitions refuse), control characters and over 1 MB, a span's name
-- and a progress note, are sent as valid protobuf strings
-- (spec/otlp/receiver.js decodes each body and encodes it back).
local jr = require "jr"
local otlp = require "otlp"

-- the span of a run of "plain" by a runner sending with proto, started
-- with env_var
local function run_span(env, base, out, proto, env_var)
  env:config(otlp.tracing(base, ("protocol = %q"):format(proto)))
  env:start(env_var)
  local id = env:push("plain", "{}")
  return otlp.wait_spans(out, otlp.of_job(id, "process default"), 1,
                         "the run's span")
end

local function is_valid_utf8(s)
  return utf8.len(s) ~= nil
end

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " OTLP/protobuf, red team:", function()
    local env = jr.test_env(backend)

    it("sends OTEL_SERVICE_NAME's UTF-8 as it is, as the JSON does; a byte not UTF-8 as '?'", function()
      local base, out = otlp.start(env, finally)
      env:script("plain", "return function() end")
      for _, proto in ipairs({ "protobuf", "json" }) do
        local got = run_span(env, base, out, proto, "OTEL_SERVICE_NAME='\xe6\x9c\x8d\xe5\x8b\x99-\1-\xff'")
        assert.equal("\xe6\x9c\x8d\xe5\x8b\x99-\1-?", got[1].service, proto)
        env:stop()
      end
    end)

    it("sends a service name of up to 255 bytes, quotes in it too, in both protocols", function()
      local base, out = otlp.start(env, finally)
      env:script("plain", "return function() end")
      local name = ('billing-"eu"-\\-'):rep(15):sub(1, 255)
      for _, proto in ipairs({ "protobuf", "json" }) do
        local got = run_span(env, base, out, proto, "OTEL_SERVICE_NAME=" .. jr.quote(name))
        assert.equal(name, got[1].service, proto)
        env:stop()
      end
    end)

    it("sends hostile text as valid strings", function()
      local base, out = otlp.start(env, finally)
      env:script("hostile", [[
        local jobrunner = require "jobrunner"
        return { max_retries = 0, handle = function(job)
          jobrunner.span("s\1p\xffan\27[31m", function() end)
          assert(not pcall(jobrunner.span, "nul\0span", function() end))
          jobrunner.span("sur\xed\xa0\x80an", function() end)
          pcall(jobrunner.progress, 1, 2, "note \0 nul")
          assert(not pcall(jobrunner.progress, 1, 2, "note \xc0\x80"))
          jobrunner.progress(1, 2, "note \1\27[2J \127 \xc3\xa9")
          if job.payload.big then
            error(string.rep("\xff\1x", 400000))  -- 1.2 MB
          end
          error("bad \xc3\x28 \xed\xa0\x80 \xf8\x88\x80\x80\x80 \31 \xc0\x80 \xe0\x80\x80 \xf5\x80\x80\x80 end")
        end }]])
      env:config(otlp.tracing(base))
      env:start("OTEL_SERVICE_NAME='t\xc3\xa2che-\xe2\x98\x83'")
      local a = env:push("hostile", '{}')
      local b = env:push("hostile", '{"big": true}')
      -- the handler's own spans may leave in a later export than the runs' spans
      local got = jr.wait_for(function()
        local s = otlp.spans(out, function(x) return x.name == "process default" end)
        local named = otlp.spans(out, function(x) return x.name:find("an", 1, true) end)
        return #s >= 2 and #named >= 4 and s
      end, 30, "both runs' spans and their four jobrunner.span spans")
      local ids = {}
      for _, s in ipairs(got) do
        ids[s.attributes["messaging.message.id"]] = s
        assert.equal("t\xc3\xa2che-\xe2\x98\x83", s.service)
        assert.equal(2, s.status.code)
        assert.truthy(s.status.message:find("bad ?( ??? ", 1, true) or
                      s.status.message:find("?\1x?\1x", 1, true), s.status.message:sub(1, 200))
        assert.is_true(is_valid_utf8(s.status.message), s.status.message:sub(1, 80))
        local notes = 0
        for _, e in ipairs(s.events) do
          for _, v in pairs(e.attributes) do
            if type(v) == "string" then
              assert.is_true(is_valid_utf8(v), e.name .. ": " .. v)
              notes = notes + 1
            end
          end
        end
        assert.is_true(notes >= 1, "the progress event's note: " .. s.status.message:sub(1, 200))
      end
      assert.truthy(ids[tostring(math.tointeger(a))], "job a's span")
      assert.truthy(ids[tostring(math.tointeger(b))], "job b's span")
      local named = otlp.spans(out, function(x) return x.name:find("an", 1, true) end)
      assert.is_true(#named >= 4, "the jobrunner.span spans")
      for _, s in ipairs(named) do assert.is_true(is_valid_utf8(s.name), s.name) end
      for _, r in ipairs(otlp.records(out)) do
        if r.type then assert.equal("application/x-protobuf", r.type) end
      end
    end)
  end)
end
