-- thumbnails/_sh: running external commands from handlers (a helper for
-- require, not a handler: its name starts with "_").
local M = {}

-- Quotes s for the shell.
function M.quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- Runs cmd (a shell command line) and returns its stdout. A non-zero exit
-- raises with the command's stderr, so the job fails and is retried.
function M.run(cmd)
  local errfile = os.tmpname()
  local p = assert(io.popen(cmd .. " 2>" .. M.quote(errfile)))
  local out = p:read("a")
  local ok, how, code = p:close()
  local f = io.open(errfile)
  local err = f and f:read("a") or ""
  if f then f:close() end
  os.remove(errfile)
  if not ok then
    error(("command failed (%s %s): %s\n%s"):format(how, tostring(code), cmd,
      err), 2)
  end
  return out
end

return M
