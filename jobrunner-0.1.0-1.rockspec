-- The producer module (require "jobrunner.client", also "jobrunner") for
-- LuaRocks, built against the system's libjobrunner: `make install` (or a
-- distribution package) first, then in this directory
--   luarocks make                         (JOBRUNNER_DIR=PREFIX if not
--                                          /usr or /usr/local)
-- The module is luaclient.c and its Lua glue (luacontrol.c, luaopts.c)
-- with the small helpers they share with the runner (JSON, buffers,
-- errors, name checks, escaping), built by `make rock`; the database work is
-- libjobrunner's jr_client_*. Needs make, a C compiler and pkg-config.
rockspec_format = "3.0"
package = "jobrunner"
version = "0.1.0-1"
source = {
  url = "jobrunner-0.1.0.tar.gz",
  dir = "jobrunner-0.1.0",
}
description = {
  summary = "Push jobs to a jobrunner queue (SQLite or PostgreSQL) from Lua",
  detailed = [[
    The producer side of jobrunner, a database-backed job runner whose
    handlers are Lua scripts: push jobs (one or a batch, with options),
    look at them, cancel them and pause queues, on a SQLite file or a
    PostgreSQL database. Needs libjobrunner (jobrunner.h and
    libjobrunner.so) installed.
  ]],
  license = "MIT",
  labels = { "jobs", "queue", "sqlite", "postgresql" },
}
dependencies = { "lua >= 5.4, < 5.5" }
external_dependencies = {
  JOBRUNNER = { header = "jobrunner.h", library = "jobrunner" },
}
build = {
  -- the Makefile's `rock` target (not "builtin": its build would write
  -- jobrunner/client.so where `make` leaves the runner's ./jobrunner)
  type = "make",
  build_target = "rock",
  build_variables = {
    CFLAGS = "$(CFLAGS)",
    LUA_INCDIR = "$(LUA_INCDIR)",
    JOBRUNNER_INCDIR = "$(JOBRUNNER_INCDIR)",
    JOBRUNNER_LIBDIR = "$(JOBRUNNER_LIBDIR)",
  },
  install_pass = false,
  install = {
    lib = { ["jobrunner.client"] = "build/rock/client.so" },
    lua = { jobrunner = "luarocks/jobrunner.lua" },
  },
}
