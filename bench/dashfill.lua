-- dashfill.lua URL N - bench/run's dashboard table: N jobs named "page"
-- (no handler takes them) with payload {"user_id": i % 1000, "i": i},
-- pushed in batches of 1000 through the producer module
-- (build/jobrunner.so).
package.cpath = "build/?.so;" .. package.cpath
local jr = require "jobrunner"
local url, n = arg[1], tonumber(arg[2])
local c = assert(jr.open(url))
local i = 0
while i < n do
  local items = {}
  for k = 1, math.min(1000, n - i) do
    items[k] = { "page", { user_id = (i + k) % 1000, i = i + k } }
  end
  assert(c:push_many(items))
  i = i + #items
end
c:close()
