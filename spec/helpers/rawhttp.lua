-- rawhttp.lua - the HTTP servers of the io specs: the recorder
-- (spec/helpers/rawhttp.c), built once per spec file into a temp dir,
-- started per test, writing the raw bytes it receives to a file; and
-- bench/slowhttp (make build/bench/slowhttp), answering after a delay.
local jr = require "jr"
local q = jr.quote

local M = {}
local dir, bin

-- Builds the recorder once into a temp dir (M.cleanup removes it).
local function build()
  if bin then return bin end
  dir = jr.sh("mktemp -d /tmp/jrrawhttp.XXXXXX"):gsub("%s+$", "")
  bin = dir .. "/rawhttp"
  local _, err, code = jr.sh(("%s -std=c11 -o %s %s"):format(
    os.getenv("CC") or "cc", q(bin),
    q(jr.root .. "/spec/helpers/rawhttp.c")))
  assert(code == 0, "cannot build rawhttp: " .. err)
  return bin
end

-- Starts the recorder writing what it receives to out; returns its base
-- URL and a stop.
function M.recorder(out)
  local log = out .. ".log"
  local pid = jr.sh(("%s %s 300 > %s 2>&1 & echo $!"):format(q(build()),
    q(out), q(log))):match("%d+")
  local port = jr.wait_for(function()
    return (jr.read_file(log) or ""):match("port (%d+)")
  end, 10, "rawhttp listening")
  return "http://127.0.0.1:" .. port, function()
    os.execute("kill " .. pid .. " 2>/dev/null")
  end
end

-- Removes the built recorder (a spec's teardown).
function M.cleanup()
  if dir then os.execute("rm -rf " .. q(dir)) end
  dir, bin = nil, nil
end

-- Starts bench/slowhttp answering after ms (0 when nil); returns its base
-- URL and a stop.
function M.slow(ms)
  local out = os.tmpname()
  local pid = jr.sh(("%s %d > %s 2>&1 & echo $!"):format(
    (os.getenv("BUILD") or "build") .. "/bench/slowhttp", ms or 0, out))
  local port = jr.wait_for(function()
    return (jr.read_file(out) or ""):match("port (%d+)")
  end, 10, "slowhttp")
  return "http://127.0.0.1:" .. port, function()
    os.execute("kill " .. pid:match("%d+"))
    os.remove(out)
  end
end

return M
