-- chaos_spec.lua - the short `make chaos` run (bench/chaos with its
-- defaults) on each backend: the runner is killed with SIGKILL a dozen
-- times while it drains; no job may be lost or left behind, no worker may
-- outlive its master, and only jobs that the killed runner held (claimed,
-- completion not committed) may run twice: bench/chaos records those rows
-- after each kill and fails on any other rerun (see its header).
local jr = require "jr"

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": chaos", function()
    it("loses and strands no job when the runner is killed at random", function()
      local out, err, code = jr.sh(("cd %s && CHAOS_BACKENDS=%s %s bench/chaos"):format(
        jr.quote(jr.root), backend, os.getenv("LUA") or "lua5.4"))
      io.stdout:write(out)
      local line = out:match("(backend=%S+ jobs=%d+ kills=%d+ lost=%d+ " ..
        "duplicated=%d+ stuck=%d+)")
      assert(line, "no figures line from bench/chaos:\n" .. out .. err)
      local f = {}
      for k, v in line:gmatch("(%w+)=(%w+)") do f[k] = tonumber(v) or v end
      assert.are.equal(backend, f.backend)
      assert.are.equal(0, f.lost, err)
      assert.are.equal(0, f.stuck, err)
      local per_kill, held = err:match("at most (%d+) duplicated per kill, " ..
        "at most (%d+) jobs held by a killed runner")
      assert(per_kill, "no in-flight figures from bench/chaos:\n" .. err)
      assert.is_true(tonumber(per_kill) <= tonumber(held), err)
      -- HELD_MAX in runtime/master/claimq.c: jobs out at the workers or not
      -- recorded yet, the most a kill can make run again
      assert.is_true(tonumber(per_kill) <= (backend == "postgres" and 480 or 240), err)
      assert.is_true(f.duplicated <= tonumber(held) * f.kills, err)
      assert.is_nil(err:find("not explained by a kill", 1, true), err)
      assert.is_nil(err:find("outlived runner", 1, true), err)
      assert.are.equal(0, code, "bench/chaos failed:\n" .. err)
    end)
  end)
end
