-- _format: a helper module (files starting with _ are not handlers);
-- handlers load it with require "_format".
local M = {}

function M.bytes(n)
  local units = { "B", "KiB", "MiB", "GiB" }
  local i = 1
  while n >= 1024 and i < #units do
    n, i = n / 1024, i + 1
  end
  return ("%.1f %s"):format(n, units[i])
end

return M
