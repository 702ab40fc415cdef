-- examples/lua-producer/producer.lua: pushing jobs from a Lua program with
-- require "jobrunner.client" (build/jobrunner.so, or the installed module).
--
--   lua5.4 examples/lua-producer/producer.lua [sqlite:jobs.db | config.lua]
local jr = require "jobrunner.client"

local target = arg[1] or "sqlite:jobs.db"
local q <close> = assert(jr.open(target))

-- One job, due in a minute, on the "mail" queue.
local id = assert(q:push("send_email", { to = "a@example.com", n = 1 },
  { run_in = 60, priority = 5, queue = "mail", max_retries = 3 }))
print("pushed send_email as job " .. id)

-- Several jobs in one transaction: all of them or none.
local ids = assert(q:push_many {
  { "hello", { name = "world" } },
  { "hello", { name = "again", tags = jr.array() }, { priority = 1 } },
  { "report.daily" },
})
print("pushed a batch: " .. table.concat(ids, " "))

-- Mistakes come back as nil, message.
local ok, err = q:push("hello", { callback = print })
print("refused: " .. tostring(ok and "nothing" or err))

local s = assert(q:stats())
print(("queued %d (ready %d, scheduled %d), running %d, dead %d"):format(
  s.queued, s.ready, s.scheduled, s.running, s.dead))
local names = {}
for name in pairs(s.names) do names[#names + 1] = name end
table.sort(names)
for _, name in ipairs(names) do
  print(("  %-14s %d queued"):format(name, s.names[name].queued))
end
