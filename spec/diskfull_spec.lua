-- diskfull_spec.lua - SQLite on a full disk: the runner says so once, keeps
-- the results its workers finished, does not spin, and records them all
-- when space is back. A small tmpfs makes the disk (needs root, as CI is).
-- The held results carry 60 KB follow-ups each, more than the WAL pages
-- SQLite has already allocated, so recording them must need new space.
local jr = require "jr"

local function has_sqlite()
  for _, b in ipairs(jr.backends()) do
    if b == "sqlite" then return true end
  end
end

if not has_sqlite() then return end

local function cpu_ticks(pid)
  local stat = jr.read_file("/proc/" .. pid .. "/stat") or ""
  local fields = {}
  for f in stat:gsub("^.-%) ", ""):gmatch("%S+") do fields[#fields + 1] = f end
  return (tonumber(fields[12]) or 0) + (tonumber(fields[13]) or 0)
end

describe("sqlite disk full:", function()
  local env, mnt
  before_each(function()
    env = jr.env("sqlite")
    mnt = env.dir .. "/db"
    os.execute("mkdir -p " .. jr.quote(mnt))
  end)
  after_each(function()
    for _, p in ipairs(env.procs) do
      if env:alive(p) then env:stop("KILL", p) end
    end
    os.execute("umount " .. jr.quote(mnt) .. " 2>/dev/null")
    env:cleanup()
  end)

  it("keeps finished results until space is back, then records each once", function()
    local _, err, code = jr.sh("mount -t tmpfs -o size=16m tmpfs " .. jr.quote(mnt))
    if code ~= 0 then
      pending("cannot mount a tmpfs here (needs root): " .. err)
      return
    end
    env.url = "sqlite:" .. mnt .. "/jobs.db"
    env:config("concurrency = 2")
    env:script("t", [[
      local jobrunner = require "jobrunner"
      return function(job)
        while not io.open(os.getenv("PWD") .. "/go") do
          local t = jobrunner.now() + 0.01
          while jobrunner.now() < t do end
        end
        jobrunner.push("follow", { pad = ("x"):rep(60000), from = job.id })
        local f = assert(io.open(os.getenv("PWD") .. "/ledger", "a"))
        f:write(job.id, "\n")
        f:close()
      end]])
    env:script("follow", "return function() end")
    for _ = 1, 20 do env:push("t") end
    local p = env:start()
    jr.wait_for(function()
      return #env:jobs("state = 'running'") > 0
    end)
    jr.sh("dd if=/dev/zero of=" .. jr.quote(mnt .. "/filler") .. " bs=4k")
    jr.write_file(env.dir .. "/go", "")
    local ok, e = pcall(jr.wait_for, function()
      return env:log(p):find("disk is full", 1, true)
    end, 30)
    assert(ok, tostring(e) .. "; jobs left: " .. env:count() ..
           "; runner log:\n" .. env:log(p))
    local t0 = cpu_ticks(p.pid)
    jr.sleep(2)
    assert.is_true(cpu_ticks(p.pid) - t0 < 50, "the runner spins on a full disk")
    assert.is_true(env:alive(p))
    local _, n = env:log(p):gsub("disk is full", "")
    assert.equal(1, n)                      -- said once per outage
    os.remove(mnt .. "/filler")
    jr.wait_for(function() return env:count() == 0 end, 30)
    assert.matches("database: back after an outage", env:log(p))
    local seen, total = {}, 0
    for _, l in ipairs(jr.lines(env.dir .. "/ledger")) do
      assert.is_nil(seen[l], "job " .. l .. " ran twice")
      seen[l] = true
      total = total + 1
    end
    assert.equal(20, total)
    assert.equal(0, env:stop())
  end)
end)
