-- first_start_spec.lua - SQLite: a push that races a runner's first start
-- on a new database file. The runner creates the file and turns it to WAL;
-- a producer opening it meanwhile got "setting WAL mode: database is
-- locked" at once (SQLite answers that without its busy handler), about
-- one push in 30 here. It now waits for the lock like any other.
local jr = require "jr"

describe("sqlite: a push racing the runner's first start", function()
  local env = jr.test_env("sqlite")

  it("waits for the new file instead of failing", function()
    env:script("a", "return function() end")
    local failed = {}
    for i = 1, 40 do
      os.remove(env:sqlite_path())
      os.remove(env:sqlite_path() .. "-wal")
      os.remove(env:sqlite_path() .. "-shm")
      local p = env:start(nil, { wait = false })
      local _, err, code = env:cli("push", "a", "{}")
      if code ~= 0 then failed[#failed + 1] = ("try %d: %s"):format(i, err) end
      env:stop("TERM", p)
    end
    assert.same({}, failed)
  end)
end)
