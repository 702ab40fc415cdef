-- payload_json_spec.lua - the runner decodes payloads itself: a worker
-- runs with no Lua module on the search paths (no lua-cjson), and
-- integers reach the handler and its stored result exact over the whole
-- int64 range from every producer (CLI, C library, Lua module, HTTP,
-- SQL), on both backends.
local jr = require "jr"
local H = require "jrhttp"

local q = jr.quote

-- the handler writes what it sees of each number, and returns the payload
local SEEN = jr.RECORD .. [[
  return function(job)
    local p, t = job.payload, { job.payload.via }
    for _, k in ipairs({ "a", "b", "c", "f", "o" }) do
      t[#t + 1] = k .. "=" .. math.type(p[k]) .. ":" .. tostring(p[k])
    end
    record("seen", table.concat(t, " "))
    return p
  end]]

local NUMBERS = '"a":9007199254740993,"b":9223372036854775807,' ..
  '"c":-9223372036854775808,"f":1.5,"o":18446744073709551616'
local WANT = "a=integer:9007199254740993 b=integer:9223372036854775807 " ..
  "c=integer:-9223372036854775808 f=float:1.5 o=float:1.844674407371e+19"

local function payload(via)
  return '{"via":"' .. via .. '",' .. NUMBERS .. '}'
end

-- A C program pushing argv[3] as job argv[2] through libjobrunner, to the
-- config file argv[1]; prints the id.
local C_PUSH = [[
#include <inttypes.h>
#include <stdio.h>
#include "jobrunner.h"
int main(int argc, char **argv)
{
    jr_client *c;
    int64_t id;
    (void)argc;
    if (jr_client_open(&c, argv[1], NULL) != JR_CLIENT_OK ||
        jr_client_push(c, argv[2], argv[3], NULL, &id) != JR_CLIENT_OK) {
        fprintf(stderr, "%s\n", c ? jr_client_errmsg(c) : "no memory");
        return 1;
    }
    printf("%" PRId64 "\n", id);
    jr_client_close(c);
    return 0;
}
]]

local function c_push(env, name, json)
  local src, bin = env.dir .. "/push.c", env.dir .. "/push"
  jr.write_file(src, C_PUSH)
  local _, err, code = jr.sh(("cc -o %s %s -I%s %s -Wl,-rpath,%s"):format(q(bin), q(src),
    q(jr.root .. "/runtime/client"), q(jr.root .. "/build/libjobrunner.so"),
    q(jr.root .. "/build")))
  assert(code == 0, "cc: " .. err)
  local out
  out, err, code = jr.sh(("%s %s %s %s"):format(q(bin), q(env.config_file), q(name), q(json)))
  assert(code == 0, "C push: " .. err)
  return assert(tonumber(out:match("%d+")))
end

describe("json.decode", function()
  local json = require("jobrunner.client").json

  it("reads what the encoder writes, integers exact, null and arrays as before", function()
    local v = assert(json.decode(
      '{"a":[1,null,{"b":[]}],"i":-9223372036854775808,"w":3.0,"e":2e3,"f":0.5,' ..
      '"big":1e400,"over":9223372036854775808,"s":"\\u00e9\\ud83d\\ude00\\n\\"","t":true}'))
    assert.equal(1, v.a[1])
    assert.equal(require("jobrunner.client").null, v.a[2])
    assert.same({}, v.a[3].b)
    assert.is_nil(getmetatable(v.a[3].b))
    assert.equal(math.mininteger, v.i)
    assert.equal("integer", math.type(v.w))
    assert.equal(2000, v.e)
    assert.equal("integer", math.type(v.e))
    assert.equal(0.5, v.f)
    assert.equal(math.huge, v.big)
    assert.equal("float", math.type(v.over))
    assert.equal("é😀\n\"", v.s)
    assert.is_true(v.t)
    assert.equal(math.maxinteger, json.decode("9223372036854775807"))
  end)

  it("says what is wrong and at which byte", function()
    local deep = ("["):rep(1001) .. ("]"):rep(1001)
    for _, c in ipairs({
      { "", "byte 1: unexpected end of text (expected a value)" },
      { '{"a":1,}', "byte 8: expected a string key" },
      { "[1 2]", "byte 4: expected ',' or ']'" },
      { '{"a" 1}', "byte 6: expected ':'" },
      { '"\\ud800"', "byte 2: \\ud800: a high surrogate without a low one" },
      { '"\\udc00"', "byte 2: \\udc00: a low surrogate without a high one" },
      { '"\\x"', "byte 2: invalid escape '\\x'" },
      { '"a\255b"', "byte 3: not valid UTF-8 (JSON text must be UTF-8)" },
      { '"a\tb"', "byte 3: control character 0x09 in a string (escape it)" },
      { '"abc', "byte 1: unterminated string" },
      { "1.", "byte 3: expected a digit after '.'" },
      { "nul", "byte 1: expected a value" },
      { "{} x", "byte 4: text after the JSON value" },
      { deep, "byte 1001: nested deeper than 1000" },
    }) do
      local v, err = json.decode(c[1])
      assert.is_nil(v, c[1])
      assert.equal(c[2], err)
    end
    assert.is_table(json.decode(("["):rep(1000) .. ("]"):rep(1000)))
  end)
end)

for _, backend in ipairs(jr.backends()) do
  describe(backend .. " payload json:", function()
    local env = jr.test_env(backend)

    it("runs a job with no Lua module on the search paths", function()
      local empty = env.dir .. "/empty"
      os.execute("mkdir -p " .. q(empty))
      env:script("seen", SEEN)
      local paths = {}
      for _, v in ipairs({ "LUA_PATH", "LUA_PATH_5_4" }) do
        paths[#paths + 1] = v .. "=" .. q(empty .. "/?.lua")
      end
      for _, v in ipairs({ "LUA_CPATH", "LUA_CPATH_5_4" }) do
        paths[#paths + 1] = v .. "=" .. q(empty .. "/?.so")
      end
      env:start(table.concat(paths, " "))
      env:push("seen", payload("cli"))
      local seen = jr.wait_file(env.dir .. "/seen", 30)
      assert.equal("cli " .. WANT .. "\n", seen)
      assert.not_matches("not found", env:log(), 1, true)
      assert.equal(0, env:stop())
    end)

    if backend == "sqlite" then
      -- only a plain SQL insert on SQLite can store such text
      it("ends a job whose payload does not decode dead, saying why", function()
        env:script("seen", SEEN)
        env:start()
        env:exec("INSERT INTO jobs (name, payload) VALUES ('seen', CAST(X'7B2261223A22FF227D' AS TEXT))")
        local row = env:wait_state(1, "dead", 30)
        assert.equal('payload cannot be decoded: byte 7: not valid UTF-8 (JSON text must be UTF-8)',
          row.last_error)
        assert.equal(1, row.attempts)
        assert.equal(0, env:stop())
      end)
    end

    it("gives the handler and the result exact integers from every producer", function()
      env:script("seen", SEEN)
      local base = H.start(env, 'result_ttl = "1h"')
      local ids = {}
      ids.cli = env:push("seen", payload("cli"))
      ids.c = c_push(env, "seen", payload("c"))
      local c = jr.client(env)
      ids.lua = assert(c:push("seen", { via = "lua", a = 9007199254740993,
        b = math.maxinteger, c = math.mininteger, f = 1.5, o = 18446744073709551616 }))
      local r = H.json(base .. "/api/jobs", 201, { body = '{"name":"seen","payload":' ..
        payload("http") .. '}' })
      ids.http = math.tointeger(r.id)
      if backend == "postgres" then
        env:exec(("SELECT %s.push('seen', %s::jsonb)"):format(env.schema,
          "'" .. payload("sql") .. "'"))
      else
        env:exec("INSERT INTO jobs (name, payload) VALUES ('seen', '" .. payload("sql") .. "')")
      end
      jr.wait_for(function() return #jr.lines(env.dir .. "/seen") == 5 end, 30,
        "five jobs seen: " .. (jr.read_file(env.dir .. "/seen") or ""))
      local seen = {}
      for _, l in ipairs(jr.lines(env.dir .. "/seen")) do
        local via, rest = l:match("^(%S+) (.*)$")
        seen[via] = rest
      end
      for _, via in ipairs({ "cli", "c", "lua", "http", "sql" }) do
        assert.equal(WANT, seen[via], via)
      end
      -- the stored results, through show and the Lua module's wait
      for via, id in pairs(ids) do
        local out, err, code = env:cli("show", tostring(id), "--json")
        assert.equal(0, code, err)
        local result = out:match('"result":(%b{})')
        assert(result, via .. ": no result in " .. out)
        assert.matches('"a": ?9007199254740993[,}]', result)
        assert.matches('"b": ?9223372036854775807[,}]', result)
        assert.matches('"c": ?%-9223372036854775808[,}]', result)
        local got = assert(c:wait(id, { timeout = 10 }))[1].result
        assert.equal(9007199254740993, got.a)
        assert.equal(math.maxinteger, got.b)
        assert.equal(math.mininteger, got.c)
        assert.equal("integer", math.type(got.b))
        assert.equal(1.5, got.f)
      end
      c:close()
      assert.equal(0, env:stop())
    end)
  end)
end
