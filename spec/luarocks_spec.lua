-- luarocks_spec: the producer module through LuaRocks, as a Lua user gets
-- it. `make install` into a temp PREFIX stands for the system's
-- libjobrunner; `luarocks make` of jobrunner-0.1.0-1.rockspec builds the
-- module against it into a temp tree (--tree); a plain lua5.4 whose paths
-- name only that tree then requires it and pushes a job.
local h = require "jr"
local q = h.quote

local function mktemp()
  return (h.sh("mktemp -d /tmp/jrrock.XXXXXX"):gsub("%s+$", ""))
end

-- A command in the repository without what an outer make (make test, make
-- asan) exported: its MAKEFLAGS and BUILD would change the build.
local function in_root(cmd)
  return h.sh(("cd %s && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BUILD " ..
    "-u SANITIZE %s"):format(q(h.root), cmd))
end

describe("luarocks make", function()
  local prefix, tree, work

  lazy_setup(function()
    local _, _, has = h.sh("command -v luarocks")
    assert(has == 0, "luarocks is not installed: run 'make deps' " ..
      "(Debian package luarocks)")
    prefix, tree, work = mktemp(), mktemp(), mktemp()
    local _, err, code = in_root(("make -s install PREFIX=%s"):format(q(prefix)))
    assert(code == 0, "make install failed: " .. err)
  end)

  lazy_teardown(function()
    if not os.getenv("JR_KEEP") then
      os.execute(("rm -rf %s %s %s"):format(q(prefix), q(tree), q(work)))
    end
  end)

  -- lua5.4 seeing only the tree's modules (and the standard ones)
  local function lua(code)
    local env = ("LUA_PATH=%s LUA_CPATH=%s"):format(
      q(tree .. "/share/lua/5.4/?.lua;" .. tree .. "/share/lua/5.4/?/init.lua"),
      q(tree .. "/lib/lua/5.4/?.so"))
    return h.sh(("cd %s && %s lua5.4 -e %s"):format(q(work), env, q(code)))
  end

  it("builds the module against the installed libjobrunner into a tree", function()
    local out, err, code = in_root(("luarocks --lua-version=5.4 make " ..
      "--tree %s JOBRUNNER_DIR=%s"):format(q(tree), q(prefix)))
    assert.equal(0, code, out .. err)
    local so = tree .. "/lib/lua/5.4/jobrunner/client.so"
    local ldd = h.sh("ldd " .. q(so))
    -- linked against the library make install put in PREFIX, not a copy
    assert.matches("libjobrunner%.so%.0 => " .. prefix:gsub("%p", "%%%0") ..
      "/lib/libjobrunner%.so%.0", ldd)
    local needed = h.sh("readelf -d " .. q(so))
    assert.is_nil(needed:find("liblua", 1, true), "the module links liblua")
    local syms = h.sh("nm -D --defined-only " .. q(so))
    assert.is_nil(syms:find(" jr_json_encode", 1, true),
      "the module exports its helpers")

    out, err, code = lua(([[
      local jr = require "jobrunner.client"
      assert(require "jobrunner" == jr, "require 'jobrunner' differs")
      assert(package.searchpath("jobrunner.client", package.cpath):find(%q, 1, true))
      local c = assert(jr.open("sqlite:jobs.db"))
      local id = assert(c:push("send_email", { to = "a@b" }, { queue = "mail" }))
      local ids = assert(c:push_many({ { "resize", { w = 1 } }, { "resize", { w = 2 } } }))
      local s = assert(c:stats())
      c:close()
      print(id, #ids, jr._VERSION)]]):format(tree))
    assert.equal(0, code, err)
    assert.matches("^1\t2\t%d+%.%d+%.%d+\n$", out)
    local rows = h.sh(("sqlite3 %s %s"):format(q(work .. "/jobs.db"),
      q("SELECT name, queue FROM jobs ORDER BY id")))
    assert.equal("send_email|mail\nresize|default\nresize|default\n", rows)
  end)
end)
