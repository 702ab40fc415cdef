-- token_redteam_spec.lua - http.token_file and http.token_env as a careless
-- user would set them: a variable name that is empty or holds '=' (the
-- C library finds another variable's tail for "A=B") is refused as such;
-- a token with a non-ASCII byte, which the dashboard's browser would send
-- as Latin-1 and never match, is refused at start; a file longer than a
-- token and its blanks is refused (a token followed by thousands of blank
-- lines and more text was taken silently); a reload after the
-- token file changed says the server keeps the old token (it does), and
-- never the token itself. The config is the same on both engines: SQLite
-- only.
local jr = require "jr"
local H = require "jrhttp"

local q = jr.quote
local OK = "return function(job) end"
local TOKEN = "file-token-0123456789abcdef"
local NEW = "new-token-fedcba9876543210"

-- `check` with the http table's keys http and the environment prefix
-- env_prefix: exit status and stderr.
local function check(env, http, env_prefix)
  env:config(('http = { listen = "127.0.0.1:0", %s }'):format(http))
  local _, err, code = jr.sh(("cd %s && %s %s -c %s check"):format(
    q(env.dir), env_prefix or "", q(jr.bin), q(env.config_file)))
  return code, err
end

local function token_file(env, text)
  local path = env.dir .. "/token"
  jr.write_file(path, text)
  os.execute("chmod 0600 " .. q(path))
  return path
end

describe("http token, red team:", function()
  local env = jr.test_env("sqlite")

  it("refuses a token_env name that is empty or holds '='", function()
    env:script("ok", OK)
    local code, err = check(env, 'token_env = ""')
    assert.equal(3, code, err)
    assert.matches("'http.token_env' must name an environment variable " ..
                   "(no '=' in the name, not empty), got ''", err, 1, true)
    -- A=B would be looked up as the variable A whose value starts "B="
    code, err = check(env, 'token_env = "A=B"', "A=B=" .. TOKEN)
    assert.equal(3, code, err)
    assert.matches("'http.token_env' must name an environment variable " ..
                   "(no '=' in the name, not empty), got 'A=B'", err, 1, true)
  end)

  it("refuses a token with a non-ASCII byte, in the file or the config",
     function()
    env:script("ok", OK)
    local path = token_file(env, TOKEN .. "\195\169\n")
    local code, err = check(env, ("token_file = %q"):format(path))
    assert.equal(3, code, err)
    assert.matches("'http.token_file' gives a token that has a space, a " ..
                   "control character or a non-ASCII byte (character 28)",
                   err, 1, true)
    code, err = check(env, ("token = %q"):format("\195\169" .. TOKEN))
    assert.equal(3, code, err)
    assert.matches("'http.token' has a space, a control character or a " ..
                   "non-ASCII byte (character 1)", err, 1, true)
    assert.is_nil(err:find(TOKEN, 1, true), err)
  end)

  it("refuses a file longer than a token, not reading it all", function()
    env:script("ok", OK)
    -- the token, then more blank lines than a token's blanks, then more
    local path = token_file(env, TOKEN .. ("\n"):rep(5000) .. "junk\n")
    local code, err = check(env, ("token_file = %q"):format(path))
    assert.equal(3, code, err)
    assert.matches(("'http.token_file' names '%s', which is too long to " ..
                    "hold a token (at most 4158 bytes)"):format(path), err,
                   1, true)
    -- a sparse file of 1 GiB is refused as quickly
    os.execute(("truncate -s 1G %s"):format(q(path)))
    local t0 = jr.now()
    code, err = check(env, ("token_file = %q"):format(path))
    assert.equal(3, code, err)
    assert.matches("which is too long to hold a token", err, 1, true)
    assert.truthy(jr.now() - t0 < 30)
  end)

  it("a reload after the token file changed says the old token stays",
     function()
    env:script("ok", OK)
    local path = token_file(env, TOKEN .. "\n")
    env:config(('watch = false, http = { listen = "127.0.0.1:0", ' ..
                'token_file = %q }'):format(path))
    env:start()
    local base = "http://127.0.0.1:" .. jr.wait_for(function()
      return env:log():match("http: listening on http://127%.0%.0%.1:(%d+)/")
    end, 10, "http listening")
    token_file(env, NEW .. "\n")
    env:signal("HUP")
    jr.wait_for(function()
      return env:log():find("reload: the http token changed", 1, true)
    end, 30, "the reload's warning")
    assert.matches("the HTTP server keeps the one it started with (the " ..
                   "old token still works) until the runner is restarted",
                   env:log(), 1, true)
    assert.equal(200, (H.req(base .. "/api/stats", { token = TOKEN })))
    assert.equal(401, (H.req(base .. "/api/stats", { token = NEW })))
    -- a reload with the server's token back says nothing of it
    token_file(env, TOKEN .. "\n")
    env:signal("HUP")
    jr.wait_for(function()
      local _, n = env:log():gsub("reloading handlers", "")
      return n >= 2
    end, 30, "the second reload")
    local log = env:log()
    local _, n = log:gsub("the http token changed", "")
    assert.equal(1, n, log)
    assert.is_nil(log:find(TOKEN, 1, true), log)
    assert.is_nil(log:find(NEW, 1, true), log)
    assert.equal(0, env:stop())
  end)
end)
