-- approval.request: asks for a decision on an expense, waits for it (up
-- to an hour) without holding a worker, then pays after a short durable
-- pause. Everything before a wait runs again on the run that follows the
-- signal: the request is written once per run, keyed by the expense.
local jobrunner = require "jobrunner"

local function append(file, line)
  local f = assert(io.open(os.getenv("PWD") .. "/" .. file, "a"))
  f:write(line, "\n")
  f:close()
end

return {
  max_retries = 3,
  handle = function(job)
    local e = job.payload
    append("requests.log", ("expense %d: %d asks for a decision"):format(
      e.expense, e.amount))
    local d, why = jobrunner.wait_signal("decision", { timeout = "1h" })
    if not d then
      return { expense = e.expense, outcome = why }     -- "timeout"
    end
    if not d.approved then
      return { expense = e.expense, outcome = "refused", by = d.by }
    end
    jobrunner.sleep_for(2)          -- a cooling-off period, kept durably
    append("paid.log", ("expense %d: %d paid, approved by %s"):format(
      e.expense, e.amount, d.by))
    return { expense = e.expense, outcome = "paid", by = d.by }
  end,
}
