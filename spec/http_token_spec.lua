-- http_token_spec.lua - the HTTP server's token from outside the config
-- file: http.token_file (a file others may neither read nor write, its
-- final newline dropped) and http.token_env (an environment variable).
-- Each works for reads and writes; a file others may read or write, a
-- missing file or variable, a bad token in either, and two sources at
-- once stop the runner at start with the key, the file and its mode.
-- The config is the same on both engines: SQLite only.
local jr = require "jr"
local H = require "jrhttp"

local q = jr.quote
local OK = "return function(job) end"
local TOKEN = "file-token-0123456789abcdef"

-- Starts env's runner with the http table's keys http (text) and the
-- environment prefix env_prefix; returns the base URL.
local function start(env, http, env_prefix)
  env:config(('http = { listen = "127.0.0.1:0", %s }'):format(http))
  env:start(env_prefix)
  local port = jr.wait_for(function()
    return env:log():match("http: listening on http://127%.0%.0%.1:(%d+)/")
  end, 10, "http listening")
  return "http://127.0.0.1:" .. port
end

-- The token works: reads need it, a write is allowed with it.
local function token_works(base, token)
  assert.equal(401, (H.req(base .. "/api/stats")))
  assert.equal(401, (H.req(base .. "/api/stats", { token = "x" .. token })))
  local code, body = H.req(base .. "/api/stats", { token = token })
  assert.equal(200, code, body)
  code, body = H.req(base .. "/api/queues/default/pause",
    { body = "{}", token = token })
  assert.equal(200, code, body)
end

-- `check` and `run` (bounded) both fail with want in their error.
local function refused(env, http, want, env_prefix)
  env:config(('http = { listen = "127.0.0.1:0", %s }'):format(http))
  local _, err, code = jr.sh(("cd %s && %s %s -c %s check"):format(
    q(env.dir), env_prefix or "", q(jr.bin), q(env.config_file)))
  assert.equal(3, code, err)
  assert.matches(want, err, 1, true)
  local _, err2, code2 = jr.sh(("cd %s && %s timeout 10 %s -c %s run"):format(
    q(env.dir), env_prefix or "", q(jr.bin), q(env.config_file)))
  assert.not_equal(0, code2)
  assert.matches(want, err2, 1, true)
end

local function token_file(env, text, mode)
  local path = env.dir .. "/token"
  jr.write_file(path, text)
  os.execute(("chmod %s %s"):format(mode, q(path)))
  return path
end

describe("http.token_file and http.token_env:", function()
  local env = jr.test_env("sqlite")

  it("token_file: the file's token, its final newline dropped", function()
    env:script("ok", OK)
    local path = token_file(env, TOKEN .. "\n", "0640")
    local base = start(env, ("token_file = %q"):format(path))
    token_works(base, TOKEN)
    -- never logged
    assert.is_nil(env:log():find(TOKEN, 1, true))
    assert.equal(0, env:stop())
  end)

  it("token_env: the variable's token", function()
    env:script("ok", OK)
    local base = start(env, 'token_env = "JR_SPEC_HTTP_TOKEN"',
      "JR_SPEC_HTTP_TOKEN=" .. TOKEN)
    token_works(base, TOKEN)
    assert.is_nil(env:log():find(TOKEN, 1, true))
    assert.equal(0, env:stop())
  end)

  it("refuses at start a token file others may read or write, naming it and its mode", function()
    env:script("ok", OK)
    for mode, shown in pairs({ ["0644"] = "0644", ["0602"] = "0602",
                               ["0604"] = "0604" }) do
      local path = token_file(env, TOKEN, mode)
      refused(env, ("token_file = %q"):format(path),
        ("jobrunner.lua:4: 'http.token_file' names '%s', which others " ..
         "may read or write (mode %s): chmod o-rw it"):format(path, shown))
    end
  end)

  it("refuses a missing file or variable, a bad token, two sources", function()
    env:script("ok", OK)
    local missing = env.dir .. "/no-token"
    refused(env, ("token_file = %q"):format(missing),
      ("'http.token_file' names '%s', which cannot be read: No such file " ..
       "or directory"):format(missing))
    refused(env, ("token_file = %q"):format(env.dir),
      "which is not a regular file")
    refused(env, ("token_file = %q"):format(token_file(env, "short\n", "0600")),
      "'http.token_file' gives a token that is too short: at least 16")
    refused(env, ("token_file = %q"):format(token_file(env, "\n\n", "0600")),
      "'http.token_file' gives a token that is blank")
    refused(env, 'token_env = "JR_SPEC_NO_SUCH_VARIABLE"',
      "'http.token_env' names the environment variable " ..
      "'JR_SPEC_NO_SUCH_VARIABLE', which is not set",
      "env -u JR_SPEC_NO_SUCH_VARIABLE")
    refused(env, 'token_env = "JR_SPEC_HTTP_TOKEN"',
      "'http.token_env' names the environment variable " ..
      "'JR_SPEC_HTTP_TOKEN', which is empty", "JR_SPEC_HTTP_TOKEN=")
    refused(env, 'token_env = "JR_SPEC_HTTP_TOKEN"',
      "'http.token_env' gives a token that has a space",
      "JR_SPEC_HTTP_TOKEN='a token with spaces in it'")
    refused(env, ('token = %q, token_env = "JR_SPEC_HTTP_TOKEN"'):format(TOKEN),
      "'http.token' is set with another of http.token, http.token_file " ..
      "and http.token_env: set one", "JR_SPEC_HTTP_TOKEN=" .. TOKEN)
  end)
end)
