-- import.rows {"src": FILE, "out": FILE, "every": N}: copies the rows of
-- src to out, upper-cased, in steps. "count" is done once per job; "rows"
-- records its cursor (the last row copied) at each row, so a later
-- attempt, or the job handed back by a stopping runner, resumes after it.
local jobrunner = require "jobrunner"

return {
  max_retries = 5,
  timeout = 600,
  handle = function(job)
    local p = job.payload
    local total = jobrunner.step("count", function()
      local n = 0
      for _ in io.lines(p.src) do n = n + 1 end
      return n
    end)
    local done = jobrunner.step("rows", function(cursor)
      local last = cursor or 0
      local out = assert(io.open(p.out, "a"))
      local i = 0
      for line in io.lines(p.src) do
        i = i + 1
        if i > last then
          out:write(line:upper(), "\n")
          out:flush()
          -- a slow row, so that a stop lands in the middle
          local t = jobrunner.now() + (p.every or 0.002)
          while jobrunner.now() < t do end
          last = i
          jobrunner.checkpoint(last)
        end
      end
      out:close()
      return last
    end)
    return { rows = done, of = total }
  end,
}
