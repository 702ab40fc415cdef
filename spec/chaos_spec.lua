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
      -- the engine's held (caps in backends/*/ops.c): jobs out at the
      -- workers or not recorded yet, the most a kill can make run again
      assert.is_true(tonumber(per_kill) <= (backend == "postgres" and 480 or 240), err)
      assert.is_true(f.duplicated <= tonumber(held) * f.kills, err)
      assert.is_nil(err:find("not explained by a kill", 1, true), err)
      assert.is_nil(err:find("outlived runner", 1, true), err)
      assert.are.equal(0, code, "bench/chaos failed:\n" .. err)
    end)
  end)
end

-- The exactly-once ledger (bench/chaosledger), short: each job writes a
-- ledger row and a count through jobrunner.sql while the runners are
-- killed; the rows and the count are exactly the jobs, however many
-- times the handlers ran.
local skip_kills = os.getenv("JR_SKIP_KILLS") == "1"   -- make asan

for _, backend in ipairs(skip_kills and {} or jr.backends()) do
  describe(backend .. ": chaos of the ledger", function()
    it("writes each job's row and count once when runners are killed", function()
      local out, err, code = jr.sh(("cd %s && CHAOS_BACKENDS=%s CHAOS_LEDGER_JOBS=2000 %s bench/chaosledger"):format(
        jr.quote(jr.root), backend, os.getenv("LUA") or "lua5.4"))
      io.stdout:write(out)
      local f = {}
      for k, v in out:gmatch("([%w_]+)=(%w+)") do f[k] = tonumber(v) or v end
      assert(f.rows, "no figures line from bench/chaosledger:\n" .. out .. err)
      assert.are.equal(backend, f.backend)
      assert.is_true(f.kills > 0, out)
      assert.are.equal(2000, f.rows, out)
      assert.are.equal(2000, f.counter, out)
      assert.are.equal(0, f.duplicates, out)
      assert.are.equal(0, f.stuck, out)
      assert.are.equal(0, code, err)
    end)
  end)
end

-- The workflow case (bench/chaosflow): fan-out/fan-in flows drained by
-- three runners on PostgreSQL, one killed with SIGKILL at random a dozen
-- times: every job runs, none before its parents completed, each batch's
-- two callbacks are pushed once, nothing is left waiting.
if jr.pg_url then
  describe("postgres: chaos of workflows", function()
    it("runs no child before its parents and fires each callback once under kills", function()
      local out, err, code = jr.sh(("cd %s && %s bench/chaosflow"):format(
        jr.quote(jr.root), os.getenv("LUA") or "lua5.4"))
      io.stdout:write(out)
      local line = out:match("(flows=%d+ jobs=%d+ kills=%d+ lost=%d+ early=%d+ " ..
        "callbacks_bad=%d+ waiting=%d+ stuck=%d+)")
      assert(line, "no figures line from bench/chaosflow:\n" .. out .. err)
      local f = {}
      for k, v in line:gmatch("([%w_]+)=(%d+)") do f[k] = tonumber(v) end
      assert.is_true(f.kills > 0)
      for _, k in ipairs({ "lost", "early", "callbacks_bad", "waiting", "stuck" }) do
        assert.are.equal(0, f[k], k .. ": " .. err)
      end
      assert.are.equal(0, code, err)
    end)
  end)
end

-- The sequences' case (bench/chaosseq): sequences drained by three
-- runners on PostgreSQL, one killed with SIGKILL at random a dozen times,
-- 5% of attempts failing: no job of a sequence starts before the one
-- pushed before it ended, none beside another of its key, none is lost,
-- nothing is left.
if jr.pg_url and not skip_kills then
  describe("postgres: chaos of sequences", function()
    it("keeps each sequence in order and one at a time under kills", function()
      local out, err, code = jr.sh(("cd %s && %s bench/chaosseq"):format(
        jr.quote(jr.root), os.getenv("LUA") or "lua5.4"))
      io.stdout:write(out)
      local line = out:match("(sequences=%d+ jobs=%d+ kills=%d+ order=%d+ " ..
        "overlaps=%d+ lost=%d+ stuck=%d+)")
      assert(line, "no figures line from bench/chaosseq:\n" .. out .. err)
      local f = {}
      for k, v in line:gmatch("([%w_]+)=(%d+)") do f[k] = tonumber(v) end
      assert.is_true(f.kills > 0)
      for _, k in ipairs({ "order", "overlaps", "lost", "stuck" }) do
        assert.are.equal(0, f[k], k .. ": " .. err)
      end
      assert.are.equal(0, code, err)
    end)
  end)
end
