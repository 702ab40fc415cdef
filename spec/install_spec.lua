-- install_spec: `make install` into a temp DESTDIR, then every example in
-- examples/ against what was installed: the C producer built with
-- pkg-config only (shared and static), the Lua producer with the installed
-- module, and the thumbnails pipeline end to end under a real runner.
local h = require "jr"
local q = h.quote

-- make in the repository, without what an outer make (make test, make
-- asan) exported: its MAKEFLAGS and BUILD would change the build.
local function make(args)
  return h.sh(("cd %s && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BUILD " ..
    "-u SANITIZE make %s"):format(q(h.root), args))
end

local function mktemp()
  return (h.sh("mktemp -d /tmp/jrinstall.XXXXXX"):gsub("%s+$", ""))
end

local function exists(path)
  local _, _, code = h.sh("test -e " .. q(path))
  return code == 0
end

local PREFIX = "/usr/local"
local FILES = {
  "bin/jobrunner", "lib/libjobrunner.a", "lib/libjobrunner.so",
  "lib/libjobrunner.so.0", "include/jobrunner.h",
  "lib/pkgconfig/jobrunner.pc", "lib/lua/5.4/jobrunner.so",
  "share/man/man1/jobrunner.1",
}

describe("make install DESTDIR", function()
  local stage, work, usr, pc_env

  lazy_setup(function()
    stage, work = mktemp(), mktemp()
    usr = stage .. PREFIX
    local _, err, code = make(("install PREFIX=%s DESTDIR=%s"):format(
      PREFIX, q(stage)))
    assert(code == 0, "make install failed: " .. err)
    pc_env = ("PKG_CONFIG_PATH=%s PKG_CONFIG_SYSROOT_DIR=%s "):format(
      q(usr .. "/lib/pkgconfig"), q(stage))
    os.execute(("cp -r %s %s"):format(q(h.root .. "/examples/c-producer"),
      q(work)))
  end)

  lazy_teardown(function()
    if not os.getenv("JR_KEEP") then
      os.execute("rm -rf " .. q(stage) .. " " .. q(work))
    end
  end)

  it("installs the binary, library, header, pc file, Lua module, man page", function()
    for _, f in ipairs(FILES) do
      assert.is_true(exists(usr .. "/" .. f), f .. " not installed")
    end
    local out = h.sh("readelf -d " .. q(usr .. "/lib/libjobrunner.so.0"))
    assert.matches("SONAME%)%s+Library soname: %[libjobrunner%.so%.0%]", out)
    assert.is_nil(out:find("libevent", 1, true), "the library needs libevent")
    out = h.sh("readelf -d " .. q(usr .. "/lib/lua/5.4/jobrunner.so"))
    assert.is_nil(out:find("liblua", 1, true), "the Lua module links liblua")
    out = h.sh(pc_env .. "pkg-config --modversion jobrunner")
    assert.matches("^%d+%.%d+%.%d+", out)
    local _, err, code = h.sh("man -l -Tutf8 " .. q(usr ..
      "/share/man/man1/jobrunner.1") .. " >/dev/null")
    assert.equal(0, code, err)
  end)

  it("builds examples/c-producer with pkg-config only and runs it", function()
    local dir = work .. "/c-producer"
    local _, err, code = h.sh(("%s make -C %s producer"):format(pc_env, q(dir)))
    assert.equal(0, code, err)
    local needed = h.sh("readelf -d " .. q(dir .. "/producer"))
    assert.matches("libjobrunner%.so%.0", needed)
    local out
    out, err, code = h.sh(("LD_LIBRARY_PATH=%s %s sqlite:%s"):format(
      q(usr .. "/lib"), q(dir .. "/producer"), q(work .. "/c.db")))
    assert.equal(0, code, err)
    assert.matches("pushed send_email as job 1\n", out)
    assert.matches("pushed a batch: 2 3 4\n", out)
    assert.matches("refused: job 'hello': invalid JSON payload", out)
    assert.matches("queued 4 %(ready 2, scheduled 2%)", out)
    local rows = h.sh(("sqlite3 %s %s"):format(q(work .. "/c.db"),
      q("SELECT name, queue, priority, max_retries FROM jobs ORDER BY id")))
    assert.equal("send_email|mail|5|3\nhello|default|0|\nhello|default|1|\n" ..
      "report.daily|default|0|\n", rows)
  end)

  it("links examples/c-producer statically with pkg-config --static", function()
    local dir = work .. "/c-producer"
    local _, err, code = h.sh(("%s make -C %s static"):format(pc_env, q(dir)))
    assert.equal(0, code, err)
    local needed = h.sh("readelf -d " .. q(dir .. "/producer-static"))
    assert.is_nil(needed:find("libjobrunner", 1, true))
    -- only jr_client_* comes out of the archive: no clash with our names
    local syms = h.sh("nm -g --defined-only " .. q(usr .. "/lib/libjobrunner.a"))
    for name in syms:gmatch(" T (%S+)") do
      assert.matches("^jr_client_", name)
    end
    local out
    out, err, code = h.sh(("%s sqlite:%s"):format(q(dir .. "/producer-static"),
      q(work .. "/static.db")))
    assert.equal(0, code, err)
    assert.matches("pushed send_email as job 1\n", out)
  end)

  it("runs examples/lua-producer with the installed module", function()
    local out, err, code = h.sh(("LUA_CPATH=%s lua5.4 %s sqlite:%s"):format(
      q(usr .. "/lib/lua/5.4/?.so"),
      q(h.root .. "/examples/lua-producer/producer.lua"), q(work .. "/lua.db")))
    assert.equal(0, code, err)
    assert.matches("pushed send_email as job 1\n", out)
    assert.matches("pushed a batch: 2 3 4\n", out)
    assert.matches("refused: job 'hello': payload.callback: cannot encode a function", out)
    assert.matches("queued 4 %(ready 3, scheduled 1%)", out)
    local tags = h.sh(("sqlite3 %s %s"):format(q(work .. "/lua.db"),
      q("SELECT payload FROM jobs WHERE id = 3")))
    assert.equal('{"name":"again","tags":[]}\n', tags)
  end)
end)

describe("make uninstall DESTDIR", function()
  it("removes every installed file", function()
    local stage = mktemp()
    local args = ("PREFIX=%s DESTDIR=%s"):format(PREFIX, q(stage))
    local _, err, code = make("install " .. args)
    assert.equal(0, code, err)
    _, err, code = make("uninstall " .. args)
    assert.equal(0, code, err)
    for _, f in ipairs(FILES) do
      assert.is_false(exists(stage .. PREFIX .. "/" .. f), f .. " left behind")
    end
    os.execute("rm -rf " .. q(stage))
  end)
end)

describe("examples/thumbnails/run.sh", function()
  it("runs the pipeline in one command", function()
    local work = mktemp()
    local out, err, code = h.sh(("JOBRUNNER=%s %s %s"):format(q(h.bin),
      q(h.root .. "/examples/thumbnails/run.sh"), q(work)))
    assert.equal(0, code, err .. out)
    assert.matches("gradient%-128%.pgm: OK", out)
    assert.matches("gradient%-thumbs", h.sh("ls " .. q(work .. "/out")))
    os.execute("rm -rf " .. q(work))
  end)
end)

-- Writes a W x H ASCII PGM (a diagonal gradient) to path.
local function write_pgm(path, w, hgt)
  local lines = { "P2", w .. " " .. hgt, "255" }
  for y = 0, hgt - 1 do
    local row = {}
    for x = 0, w - 1 do row[#row + 1] = (x + y) * 255 // (w + hgt - 2) end
    lines[#lines + 1] = table.concat(row, " ")
  end
  h.write_file(path, table.concat(lines, "\n") .. "\n")
end

for _, backend in ipairs(h.backends()) do
  describe(backend .. ": examples/thumbnails under a runner", function()
    local env, jr

    before_each(function()
      jr = require "jobrunner"
      env = h.env(backend)
      os.execute(("cp -r %s/examples/thumbnails/scripts/. %s/scripts/"):format(
        q(h.root), q(env.dir)))
    end)

    after_each(function() env:cleanup() end)

    it("scales with awk, then the follow-up packs with sha256sum and tar", function()
      write_pgm(env.dir .. "/photo.pgm", 80, 60)
      env:start()
      local c = assert(jr.open(env.config_file))
      assert(c:push("thumbnails.scale", { src = env.dir .. "/photo.pgm",
        out = env.dir .. "/out", widths = { 40, 20 } }))
      c:close()
      local archive = env.dir .. "/out/photo-thumbs.tar.gz"
      h.wait_for(function()
        return env:count() == 0 and exists(archive)
      end, 30, "both jobs done")
      assert.equal("P2\n20 15\n255\n",
        h.read_file(env.dir .. "/out/photo-20.pgm"):match("^P2\n%d+ %d+\n%d+\n"))
      local out, err, code = h.sh(("cd %s && sha256sum -c SHA256SUMS"):format(
        q(env.dir .. "/out")))
      assert.equal(0, code, err)
      assert.matches("photo%-40%.pgm: OK\nphoto%-20%.pgm: OK", out)
      out = h.sh("tar tzf " .. q(archive))
      assert.equal("SHA256SUMS\nphoto-40.pgm\nphoto-20.pgm\n", out)
      assert.matches("%(thumbnails%.publish%): published", env:log())
      assert.equal(0, env:count("dead"))
    end)

    it("fails and retries when the command fails, with no follow-up", function()
      env:start()
      local c = assert(jr.open(env.config_file))
      local id = assert(c:push("thumbnails.scale", {
        src = env.dir .. "/missing.pgm", out = env.dir .. "/out" }))
      c:close()
      local row = h.wait_for(function()
        local r = env:job(id)
        return r and r.attempts == 1 and r.state == "queued" and r
      end, 20, "first attempt failed")
      assert.matches("command failed", row.last_error)
      assert.matches("missing%.pgm", row.last_error)
      assert.equal(1, env:count())   -- no thumbnails.publish was queued
    end)
  end)
end
