-- pgcluster.lua - starts and stops a throwaway PostgreSQL cluster for specs by
-- shelling out to pgcluster.sh, found next to this file.
--
--   local pg = require "pgcluster"
--   local c = pg.start()  -- {url = "postgresql:///postgres?...", dir = "/tmp/.."}
--   pg.restart(c)
--   pg.stop(c)

local M = {}

local function script_path()
  local src = debug.getinfo(1, "S").source
  local dir = src:sub(1, 1) == "@" and src:sub(2):match("^(.*)/[^/]*$")
  if dir then
    return dir .. "/pgcluster.sh"
  end
  return "spec/helpers/pgcluster.sh"
end

local SCRIPT = script_path()

local function quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- Runs pgcluster.sh with args; returns its stdout, or raises with its
-- stderr and exit status.
local function run(...)
  local args = { quote(SCRIPT) }
  for _, a in ipairs({ ... }) do
    args[#args + 1] = quote(a)
  end
  local errfile = os.tmpname()
  local p = assert(io.popen(table.concat(args, " ") .. " 2>" .. quote(errfile)))
  local out = p:read("a")
  local ok, how, code = p:close()
  local f = io.open(errfile)
  local errtext = f and f:read("a") or ""
  if f then
    f:close()
  end
  os.remove(errfile)
  if not ok then
    error(("pgcluster.sh %s failed (%s %s): %s"):format(
      table.concat({ ... }, " "), how, code, errtext), 3)
  end
  return (out:gsub("%s+$", ""))
end

function M.start()
  local url = run("start")
  local dir = url:match("host=([^&]+)")
  assert(dir, "pgcluster.sh printed no host= in '" .. url .. "'")
  return { url = url, dir = dir }
end

function M.restart(c)
  run("restart", c.dir)
end

function M.stop(c)
  if c and c.dir then
    run("stop", c.dir)
    c.dir = nil
  end
end

return M
