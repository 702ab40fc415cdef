-- layers_spec.lua - the folders are the layers, and this spec keeps them so
-- (docs/design.md, "Where the code lives"): storage (backend.h) is reached
-- from db/, client/, cli/ and the HTTP database reader (http/apidb*.c)
-- only; the master's internals (master/master_int.h) from master/ only
-- (the services see master/svc.h); base/ and backends/ include no Lua (each of these
-- through the headers a file includes, too); runtime/ asks its engine's
-- capabilities (caps.h), never its name; and no two folders include or
-- call each other in a circle. The order of the layers is
-- runtime/LAYERS, which the Makefile reads too; the "Uses" sentence of a
-- file's header comment names only headers it includes. The rules are
-- spec/helpers/layers.lua's check(root); it runs here on the repository,
-- and on small trees built in a temp dir, one breaking each rule, to show
-- that it fails on them.
local lfs = require "lfs"
local layers = require "layers"

-- A temp tree of files: files maps a path to its text.
local function tree(files)
  local root = os.tmpname()
  os.remove(root)
  assert(lfs.mkdir(root))
  for path, text in pairs(files) do
    local dir = root
    for part in path:gmatch("([^/]+)/") do
      dir = dir .. "/" .. part
      lfs.mkdir(dir)
    end
    local f = assert(io.open(root .. "/" .. path, "w"))
    f:write(text)
    f:close()
  end
  return root
end

local function remove(path)
  if lfs.attributes(path, "mode") == "directory" then
    for e in lfs.dir(path) do
      if e ~= "." and e ~= ".." then remove(path .. "/" .. e) end
    end
  end
  os.remove(path)
end

-- A tree that keeps every rule: each layer uses the one below, services
-- call the master through master/svc.h, the master calls none.
local GOOD = {
  ["backends/backend.h"] = "int jr_db_open(void);\n",
  ["backends/backend.c"] = '#include "backend.h"\n#include "base/err.h"\n' ..
    "int\njr_db_open(void)\n{\n    return jr_err_x();\n}\n",
  ["backends/sqlite/sqlite.c"] = '#include "backend.h"\n' ..
    "int\njr_sqlite_open(void)\n{\n    return jr_db_open();\n}\n",
  ["runtime/base/err.h"] = "int jr_err_x(void);\n",
  ["runtime/base/err.c"] = '#include "base/err.h"\n' ..
    "int\njr_err_x(void)\n{\n    return 0;\n}\n",
  ["runtime/lua/script.c"] = "#include <lua.h>\n#include \"base/err.h\"\n",
  ["runtime/master/master_int.h"] = '#include "master/svc.h"\n' ..
    "int jr_master_kick(void);\n",
  ["runtime/master/master.c"] = '#include "master/master_int.h"\n' ..
    "int\njr_master_kick(void)\n{\n    return 0;\n}\n",
  ["runtime/master/svc.h"] = "int jr_svc_kick(void);\n",
  ["runtime/master/svc.c"] = '#include "master/master_int.h"\n' ..
    "int\njr_svc_kick(void)\n{\n    return jr_master_kick();\n}\n",
  ["runtime/services/cancel.h"] = "int jr_cancel_tick(void);\n",
  ["runtime/services/cancel.c"] = '#include "master/svc.h"\n' ..
    "int\njr_cancel_tick(void)\n{\n    return jr_svc_kick();\n}\n",
  ["runtime/db/dbthread.c"] = '#include "backend.h"\n',
  ["runtime/http/apidb.c"] = '#include "backend.h"\n',
  ["runtime/http/apidbflow.c"] = '#include "backend.h"\n',
  ["runtime/client/client.c"] = '#include "backend.h"\n',
  ["runtime/cli/main.c"] = '#include "backend.h"\n' ..
    "/* jr_master_kick() in a comment is no call */\n" ..
    'static const char *s = "jr_master_kick()";\n',
}

local function with(over)
  local files = {}
  for k, v in pairs(GOOD) do files[k] = v end
  for k, v in pairs(over) do files[k] = v end
  return files
end

-- The Makefile's LAYERS as make expands it.
local function make_layers()
  local mk = os.tmpname()
  local f = assert(io.open(mk, "w"))
  f:write("print-layers:\n\t@echo '$(LAYERS)'\n")
  f:close()
  local p = assert(io.popen("make -s --no-print-directory -f Makefile -f " ..
                            mk .. " print-layers 2>&1"))
  local out = p:read("a")
  p:close()
  os.remove(mk)
  return out
end

describe("layers:", function()
  it("are named once, in runtime/LAYERS, which the Makefile builds",
     function()
    local order, seen, runtime = layers.order(), {}, {}
    for _, name in ipairs(order) do
      local dir = name == "backends" and name or "runtime/" .. name
      assert(lfs.attributes(dir, "mode") == "directory",
             "runtime/LAYERS names " .. name .. ", which is no folder")
      seen[name] = true
      if name ~= "backends" then runtime[#runtime + 1] = name end
    end
    assert.is_true(seen.backends and #runtime >= 10)
    for e in lfs.dir("runtime") do
      if e:sub(1, 1) ~= "." and e ~= "LAYERS" and
         lfs.attributes("runtime/" .. e, "mode") == "directory" then
        assert(seen[e], "runtime/" .. e .. " is not in runtime/LAYERS")
      end
    end
    assert.equal(table.concat(runtime, " ") .. "\n", make_layers())
  end)

  it("the repository keeps the layer rules", function()
    local bad = layers.check(".")
    assert(#bad == 0, #bad .. " violations of the layer rules:\n" ..
                      table.concat(bad, "\n"))
  end)

  it("passes a tree that keeps them", function()
    local root = tree(GOOD)
    finally(function() remove(root) end)
    assert.same({}, layers.check(root))
  end)

  it("fails a tree with forbidden includes, naming file and line", function()
    local root = tree(with({
      ["runtime/http/api.c"] = '#include "base/err.h"\n' ..
        '#include "backend.h"\n#include "master/master_int.h"\n',
      ["runtime/base/log.c"] = "#include <stdio.h>\n#include <lauxlib.h>\n",
      ["backends/sqlite/conn.c"] = "#include <lua.h>\n",
    }))
    finally(function() remove(root) end)
    assert.same({
      "backends/sqlite/conn.c:1: includes lua.h (base/ and backends/ use " ..
        "no Lua)",
      "runtime/base/log.c:2: includes lauxlib.h (base/ and backends/ use " ..
        "no Lua)",
      "runtime/http/api.c:2: includes backend.h (storage is reached from " ..
        "db/, client/, cli/ and http/apidb*.[ch] only)",
      "runtime/http/api.c:3: includes master/master_int.h (master/ only: " ..
        "services/ use master/svc.h)",
    }, layers.check(root))
  end)

  it("fails a forbidden include reached through the tree's headers",
     function()
    local root = tree(with({
      ["runtime/db/dbcalls.h"] = '#include "base/err.h"\n' ..
        '#include "db/dbinner.h"\n',
      ["runtime/db/dbinner.h"] = '#include "backend.h"\n',
      ["runtime/master/lane.c"] = '#include "master/master_int.h"\n' ..
        '#include "db/dbcalls.h"\n',
      ["runtime/base/err.h"] = '#include "base/lua_glue.h"\n' ..
        "int jr_err_x(void);\n",
      ["runtime/base/lua_glue.h"] = "#include <lua.h>\n",
    }))
    finally(function() remove(root) end)
    assert.same({
      "backends/backend.c:2: includes lua.h (base/ and backends/ use no " ..
        "Lua) (through base/err.h)",
      "runtime/base/err.c:1: includes lua.h (base/ and backends/ use no " ..
        "Lua) (through base/err.h)",
      "runtime/base/err.h:1: includes lua.h (base/ and backends/ use no " ..
        "Lua) (through base/lua_glue.h)",
      "runtime/base/lua_glue.h:1: includes lua.h (base/ and backends/ use " ..
        "no Lua)",
      "runtime/master/lane.c:2: includes backend.h (storage is reached " ..
        "from db/, client/, cli/ and http/apidb*.[ch] only) (through " ..
        "db/dbcalls.h)",
    }, layers.check(root))
  end)

  it("fails a service that reaches the master's internals, directly or " ..
     "through a header", function()
    local root = tree(with({
      ["runtime/services/cancel.c"] = '#include "master/master_int.h"\n' ..
        "int\njr_cancel_tick(void)\n{\n    return jr_master_kick();\n}\n",
      ["runtime/services/prune.h"] = '#include "master/master_int.h"\n',
      ["runtime/services/prune.c"] = '#include "services/prune.h"\n',
      ["runtime/master/service.h"] = '#include "master/master_int.h"\n',
      ["runtime/services/waits.c"] = '#include "master/service.h"\n' ..
        '#include "master/svc.h"\n',
    }))
    finally(function() remove(root) end)
    local why = "includes master/master_int.h (master/ only: services/ " ..
                "use master/svc.h)"
    assert.same({
      "runtime/services/cancel.c:1: " .. why,
      "runtime/services/prune.c:1: " .. why .. " (through services/prune.h)",
      "runtime/services/prune.h:1: " .. why,
      "runtime/services/waits.c:1: " .. why .. " (through master/service.h)",
    }, layers.check(root))
  end)

  it("fails runtime/ code that asks which engine it talks to", function()
    local root = tree(with({
      ["runtime/db/dbends.c"] = '#include "backend.h"\n' ..
        "/* on \"sqlite\" a commit wakes */\n" ..
        'static const char *u = "sqlite:x.db";\n' ..
        "int\njr_dbends_x(const jr_db *db)\n{\n" ..
        '    return strcmp(db->ops->name, "sqlite") == 0;\n}\n',
      ["runtime/master/lane.c"] = '#include "master/master_int.h"\n' ..
        "static int\nlane(const jr_backend_ops ops)\n{\n" ..
        "    return ops.name[0] == 'p';\n}\n",
    }))
    finally(function() remove(root) end)
    assert.same({
      "runtime/db/dbends.c:7: asks which engine it talks to (\"sqlite\"): " ..
        "ask its capability (caps.h)",
      "runtime/master/lane.c:5: asks which engine it talks to (ops.name): " ..
        "ask its capability (caps.h)",
    }, layers.check(root))
  end)

  it("the files' Uses lines name only what they include", function()
    local bad = layers.uses(".")
    assert(#bad == 0, #bad .. " stale Uses lines:\n" ..
                      table.concat(bad, "\n"))
  end)

  it("fails a Uses line that names what the file does not include",
     function()
    local root = tree(with({
      ["runtime/http/http.h"] = '#include "base/err.h"\n',
      ["runtime/http/http.c"] = "/* http.c - the server. Uses http.h,\n" ..
        " * err.h (through http.h), host.h's jr_httphost,\n" ..
        " * gone.c. */\n" .. '#include "http/http.h"\n',
      ["runtime/http/host.h"] = "/* host.h - Uses err.h. */\n",
      ["runtime/http/host.c"] = '#include "base/err.h"\n',
    }))
    finally(function() remove(root) end)
    assert.same({
      "runtime/http/http.c: Uses names gone.c, which is no file of the tree",
      "runtime/http/http.c: Uses names host.h, which it does not include",
    }, layers.uses(root))
  end)

  it("fails a tree of unknown folders in a circle, naming every edge",
     function()
    local root = tree(with({
      ["runtime/aa/a.c"] = '#include "bb/b.h"\n',
      ["runtime/bb/b.h"] = "int jr_b(void);\n",
      ["runtime/bb/b.c"] = '#include "aa/a.h"\n',
      ["runtime/aa/a.h"] = "int jr_a(void);\n",
    }))
    finally(function() remove(root) end)
    assert.same({
      "runtime/aa/a.c:1: folders in a cycle (aa/ bb/): aa/ -> bb/: " ..
        'includes "bb/b.h"',
      "runtime/bb/b.c:1: folders in a cycle (aa/ bb/): bb/ -> aa/: " ..
        'includes "aa/a.h"',
    }, layers.check(root))
  end)

  it("fails a tree whose master calls a service", function()
    local root = tree(with({
      ["runtime/master/master.c"] = '#include "master/master_int.h"\n' ..
        '#include "services/cancel.h"\n' ..
        "int\njr_master_kick(void)\n{\n    return jr_cancel_tick();\n}\n",
    }))
    finally(function() remove(root) end)
    assert.same({      -- services/ is above master/: both edges up named
      "runtime/master/master.c:2: folders in a cycle (master/ services/): " ..
        'master/ -> services/: includes "services/cancel.h"',
      "runtime/master/master.c:6: folders in a cycle (master/ services/): " ..
        "master/ -> services/: calls jr_cancel_tick",
    }, layers.check(root))
  end)

  it("fails a tree whose folders call each other in a circle", function()
    local root = tree(with({
      ["runtime/config/config.h"] = "int jr_config_load(void);\n",
      ["runtime/config/config.c"] = '#include "lua/script.h"\n' ..
        "int\njr_config_load(void)\n{\n    return jr_luabridge_run();\n}\n",
      ["runtime/lua/script.h"] = "int jr_luabridge_run(void);\n",
      ["runtime/lua/script.c"] = "#include <lua.h>\n" ..
        "int\njr_script_run(void)\n{\n    return jr_config_load();\n}\n",
    }))
    finally(function() remove(root) end)
    assert.same({      -- config/ is above lua/: the call up is named
      "runtime/lua/script.c:5: folders in a cycle (config/ lua/): " ..
        "lua/ -> config/: calls jr_config_load",
    }, layers.check(root))
  end)
end)
