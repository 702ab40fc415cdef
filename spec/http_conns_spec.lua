-- http_conns_spec.lua - the HTTP server's connections: a request must
-- arrive whole within 10 s however slowly it trickles in; at most
-- http.max_connections are open, the oldest idle one making room for a
-- new one; when descriptors run out, accept() backs off and says so once,
-- and the server still answers. Connections hold no job state: SQLite
-- only.
local jr = require "jr"
local H = require "jrhttp"

local q = jr.quote

-- Runs script in bash in the background; returns its pid.
local function bg(script)
  local out = jr.sh(("bash -c %s >/dev/null 2>&1 & echo $!"):format(q(script)))
  return tonumber(out:match("%d+"))
end

-- Sockets the process pid holds.
local function sockets(pid)
  local out = jr.sh(("ls -l /proc/%d/fd 2>/dev/null | grep -c 'socket:'"):format(pid))
  return tonumber(out:match("%d+")) or 0
end

-- Lines of text that contain s.
local function count(text, s)
  local n, at = 0, 1
  while true do
    local i = text:find(s, at, true)
    if not i then return n end
    n, at = n + 1, i + #s
  end
end

-- Starts env's runner with the token and more http fields, prefixed by
-- prefix (a command); returns the base URL and the port.
local function start(env, fields, prefix)
  env:config(('http = { listen = "127.0.0.1:0", token = %q%s }'):format(H.TOKEN,
    fields and (", " .. fields) or ""))
  env:start(prefix)
  local port = jr.wait_for(function()
    return env:log():match("http: listening on http://127%.0%.0%.1:(%d+)/")
  end, 10, "http listening")
  return "http://127.0.0.1:" .. port, port
end

describe("sqlite http connections:", function()
  local env = jr.test_env("sqlite")
  local pids
  before_each(function() pids = {} end)
  after_each(function()
    for _, pid in ipairs(pids) do os.execute("kill " .. pid .. " 2>/dev/null") end
  end)

  it("closes a request that trickles in a byte a second once 10 s have passed", function()
    env:script("ok", "return function(job) end")
    local base = H.start(env)
    local port = base:match(":(%d+)$")
    local out = env.dir .. "/trickle"
    -- 60 bytes of headers, one a second, never the blank line: each byte
    -- came well within the 10 s, the whole request never does
    pids[#pids + 1] = bg(([[trap '' PIPE; exec 3<>/dev/tcp/127.0.0.1/%s
      req='GET /api/stats HTTP/1.1\r\nHost: localhost\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaa'
      for i in $(seq 0 59); do
        printf '%%s' "${req:$i:1}" >&3 || { echo "closed $i" > %s; exit; }
        read -t 1 -n 1 -u 3 x; rc=$?
        if [ $rc -eq 1 ] || [ $rc -eq 0 ]; then echo "closed $i" > %s; exit; fi
      done
      echo "open after 60 s" > %s]]):format(port, q(out), q(out), q(out)))
    local said = jr.wait_for(function()
      local f = io.open(out)
      local s = f and f:read("a")
      if f then f:close() end
      return s and s ~= "" and s
    end, 75, "the trickling client's fate")
    local n = tonumber(said:match("^closed (%d+)"))
    assert.is_number(n, said)
    assert.is_true(n < 40, said)
    assert.matches("a request did not arrive whole within 10 s", env:log(), 1, true)
    -- the server goes on
    assert.equal(200, (H.req(base .. "/api/stats", { token = true })))
    assert.equal(0, env:stop())
  end)

  it("keeps at most http.max_connections open; a new one takes the oldest idle one's place", function()
    env:script("ok", "return function(job) end")
    local base, port = start(env, "max_connections = 4")
    local pid = env.proc.pid
    local before = sockets(pid)
    -- ten clients connect and say nothing
    for _ = 1, 10 do
      pids[#pids + 1] = bg(("exec 3<>/dev/tcp/127.0.0.1/%s; sleep 60"):format(port))
    end
    jr.wait_for(function()
      return env:log():find("the most http.max_connections allows", 1, true)
    end, 20, "the cap reached")
    assert.is_true(sockets(pid) - before <= 4, "sockets: " .. (sockets(pid) - before))
    -- a real request gets in, in place of an idle one
    local code, body = H.req(base .. "/api/stats", { token = true })
    assert.equal(200, code, body)
    assert.matches("closed the oldest idle connection", env:log(), 1, true)
    assert.is_true(sockets(pid) - before <= 4, "sockets: " .. (sockets(pid) - before))
    assert.equal(0, env:stop())
  end)

  it("lets a request in at once after a burst of connections reached the cap", function()
    env:script("ok", "return function(job) end")
    local base, port = start(env, "max_connections = 4")
    -- one shell opens ten connections back to back: the server accepts
    -- several in one turn of its loop, before evhttp has wrapped any
    local fds = {}
    for fd = 3, 12 do
      fds[#fds + 1] = ("exec %d<>/dev/tcp/127.0.0.1/%s"):format(fd, port)
    end
    pids[#pids + 1] = bg(table.concat(fds, "; ") .. "; sleep 60")
    jr.wait_for(function()
      return env:log():find("the most http.max_connections allows", 1, true)
    end, 20, "the cap reached")
    -- the idle ones' deadline is 10 s away: the request comes well before
    local code, body = H.req(base .. "/api/stats", { token = true, max_time = 5 })
    assert.equal(200, code, body)
    assert.equal(0, env:stop())
  end)

  it("counts every connection out again, whatever way it ended (jobrunner_http_connections)", function()
    env:script("ok", "return function(job) end")
    local base, port = start(env)
    local big = env.dir .. "/big.json"
    jr.write_file(big, ('{"ids":[%s]}'):format(("1,"):rep(40000) .. "1"))
    local auth = q("Authorization: Bearer " .. H.TOKEN)
    jr.sh(([[cd %s
      for i in $(seq 20); do
        curl -s -o /dev/null -H %s %s/api/stats
        curl -s -o /dev/null -H %s -H 'Connection: close' %s/metrics
        curl -s -o /dev/null -H %s -H 'Content-Type: application/json' --data-binary @big.json %s/api/dead/retry
        curl -s -o /dev/null -X PUT %s/api/stats
        curl -s -o /dev/null -m 0.2 -H %s %s/api/stats?limit=1000
        bash -c 'exec 3<>/dev/tcp/127.0.0.1/%s; printf "GARBAGE

" >&3; cat <&3 >/dev/null'
        bash -c 'exec 3<>/dev/tcp/127.0.0.1/%s; printf "GET /api/st" >&3'
        bash -c 'exec 3<>/dev/tcp/127.0.0.1/%s'
      done]]):format(q(env.dir), auth, base, auth, base, auth, base, base, auth, base, port, port, port))
    -- all gone: the scrape's own connection is the one left
    jr.wait_for(function()
      local _, text = H.req(base .. "/metrics", { token = true })
      return text:find("\njobrunner_http_connections 1\n", 1, true)
    end, 20, "every connection counted out")
    assert.equal(0, env:stop())
  end)

  it("backs off accept() when descriptors run out, says so once, and still answers and runs jobs", function()
    env:script("ok", "return function(job) end")
    local base, port = start(env, nil, "prlimit --nofile=48:48")
    for _ = 1, 60 do
      pids[#pids + 1] = bg(("exec 3<>/dev/tcp/127.0.0.1/%s; sleep 60"):format(port))
    end
    -- whether accept() failed or the cap came first, the server answers
    local code, body = H.req(base .. "/api/stats", { token = true })
    assert.equal(200, code, body)
    local id = env:push("ok")
    jr.wait_for(function() return env:job(id) == nil end, 20, "job done beside 60 silent clients")
    code = H.req(base .. "/metrics", { token = true })
    assert.equal(200, code)
    local log = env:log()
    assert.is_true(count(log, "Too many open files") <= 3, "lines: " .. count(log, "Too many open files"))
    -- the cap fits the descriptors: the process has 48, connections get half
    assert.matches("http.max_connections 256 is more than half of the 48 descriptors", log, 1, true)
    assert.equal(0, env:stop())
  end)
end)
