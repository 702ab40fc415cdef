-- crash_spec.lua - the short `make crash` run (bench/crash) on each
-- backend: SQLite power cuts in both loss modes (every unsynced write
-- dropped, or a random subset of unsynced chunks kept) and I/O errors
-- (EIO, ENOSPC on read, write and sync) through the test VFS
-- bench/crashvfs.c; kill -9 of PostgreSQL. No acknowledged push may be
-- lost, no job left behind, no limit or unique key exceeded, no schedule
-- instant made twice, no follow-up missing; the SQLite file must pass
-- integrity_check after every cut; the runner must live through every
-- I/O error and server crash. Runs again are allowed and counted.
local jr = require "jr"

local COUNTS = {
  sqlite = "CRASH_SQLITE_CUTS=12 CRASH_IO=6",
  postgres = "CRASH_PG=4",
}

for _, backend in ipairs(jr.backends()) do
  describe(backend .. ": crash", function()
    it("loses no acknowledged push through power cuts, I/O errors and server crashes", function()
      local vfs = jr.root .. "/build/bench/crashvfs.so"
      assert(io.open(vfs), "no " .. vfs .. ": make crash-tools"):close()
      local out, err, code = jr.sh(("cd %s && CRASH_BACKENDS=%s %s CRASHVFS=%s %s bench/crash")
        :format(jr.quote(jr.root), backend, COUNTS[backend], jr.quote(vfs),
          os.getenv("LUA") or "lua5.4"))
      io.stdout:write(out)
      local line = out:match("(backend=%S+ [^\n]*)")
      assert(line, "no figures line from bench/crash:\n" .. out .. err)
      local f = {}
      for k, v in line:gmatch("([%w_]+)=([%w_]+)") do f[k] = tonumber(v) or v end
      assert.are.equal(backend, f.backend)
      assert.is_true(f.acked > 0, err)
      assert.are.equal(0, f.lost, err)
      assert.are.equal(0, f.stuck, err)
      assert.are.equal(0, f.concurrent, err)
      assert.is_true(f.unique_live <= 1, err)
      assert.are.equal(0, f.sched_twice, err)
      assert.are.equal(0, f.followups_missing, err)
      if backend == "sqlite" then
        assert.are.equal(12, f.cuts)
        assert.are.equal(6, f.drop)
        assert.are.equal(6, f.torn)
        assert.are.equal(12, f.integrity_ok, err)
        assert.are.equal(18, f.survived, err)
      else
        assert.are.equal(4, f.crashes)
        assert.are.equal(4, f.survived, err)
      end
      assert.is_nil(err:find("the runner died", 1, true), err)
      assert.are.equal(0, code, "bench/crash failed:\n" .. err)
    end)
  end)
end
