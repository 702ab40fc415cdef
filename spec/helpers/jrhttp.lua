-- jrhttp.lua - talks to a runner's HTTP server from specs (curl): start a
-- runner with `http` in its config, find its port in the log, send
-- requests and read status, headers and body.
local jr = require "jr"
local cjson = require "cjson"
local assert = require "luassert"

local M = {}
M.TOKEN = "spec-token-0123456789abcdef"

-- Starts env's runner listening on a free loopback port (port 0) with the
-- token (opts.token false: none; a string: that one), opts.http (more
-- keys of the http table, as text) and extra config. Returns the base URL.
function M.start(env, extra, opts)
  opts = opts or {}
  local token = opts.token == nil and M.TOKEN or opts.token
  local http = ('http = { listen = "127.0.0.1:0"%s%s }'):format(
    token and (', token = %q'):format(token) or "",
    opts.http and (", " .. opts.http) or "")
  env:config(http .. (extra and extra ~= "" and (", " .. extra) or ""))
  env:start()
  local port = jr.wait_for(function()
    return env:log():match("http: listening on http://127%.0%.0%.1:(%d+)/")
  end, 30, "http listening")
  return "http://127.0.0.1:" .. port
end

-- Sends a request; returns status (number), body, headers (text).
-- opts: method, body, token (true: M.TOKEN), headers (list), type,
-- max_time (curl's seconds for the whole request, default 10).
function M.req(url, opts)
  opts = opts or {}
  local args = { "curl", "-s", "-S", "-m", tostring(opts.max_time or 10),
                 "-D", "-", "-o", "-",
                 "-X", opts.method or (opts.body and "POST" or "GET") }
  if opts.token then
    args[#args + 1] = "-H"
    args[#args + 1] = "Authorization: Bearer " ..
      (opts.token == true and M.TOKEN or opts.token)
  end
  if opts.type ~= false and (opts.method == "POST" or opts.body) then
    args[#args + 1] = "-H"
    args[#args + 1] = "Content-Type: " .. (opts.type or "application/json")
  end
  for _, h in ipairs(opts.headers or {}) do
    args[#args + 1] = "-H"
    args[#args + 1] = h
  end
  if opts.body then
    local f = os.tmpname()
    jr.write_file(f, opts.body)
    args[#args + 1] = "--data-binary"
    args[#args + 1] = "@" .. f
    opts.tmp = f
  end
  args[#args + 1] = "--path-as-is"
  args[#args + 1] = url
  for i, a in ipairs(args) do args[i] = jr.quote(a) end
  local out, err = jr.sh(table.concat(args, " "))
  if opts.tmp then os.remove(opts.tmp) end
  local head, body = out:match("^(.-\r\n)\r\n(.*)$")
  assert(head, "no HTTP reply from " .. url .. ": " .. err)
  return tonumber(head:match("^HTTP/%S+ (%d+)")), body, head
end

-- GET or POST with the token, expecting status; returns the decoded JSON.
function M.json(url, status, opts)
  opts = opts or {}
  if opts.token == nil then opts.token = true end
  local code, body = M.req(url, opts)
  assert.equal(status or 200, code, body)
  return cjson.decode(body)
end

return M
