-- thumbnails/_sh: running external programs from handlers (a helper for
-- require, not a handler: its name starts with "_"). jobrunner.exec runs
-- the program without a shell (nothing to quote), and while it runs the
-- worker runs the handler's other jobs (docs/io.md).
local jobrunner = require "jobrunner"
local M = {}

-- Runs argv (the program and its arguments) with opts (stdin, cwd,
-- timeout, env) and returns its stdout. A program that cannot start or
-- exits non-zero raises with its stderr, so the job fails and is retried.
function M.run(argv, opts)
  local r, err = jobrunner.exec(argv, opts)
  if not r then error(err, 2) end
  if r.status ~= 0 then
    error(("command failed (exit %d): %s\n%s"):format(r.status,
      table.concat(argv, " "), r.stderr), 2)
  end
  return r.stdout
end

-- Writes data to path.
function M.write(path, data)
  local f = assert(io.open(path, "wb"))
  assert(f:write(data))
  assert(f:close())
end

return M
