-- deb_spec: the Debian packages, built from this tree and installed on
-- this machine. `make deb` builds jobrunner, libjobrunner0,
-- libjobrunner-dev and lua-jobrunner into build/deb/ and lintian passes
-- them; dpkg installs them (the jobrunner user, /var/lib/jobrunner, the
-- conffile root:jobrunner 0640, the tokens' folder root:jobrunner 0750, no
-- unit enabled); `jobrunner check` and a job run as the
-- jobrunner user with a handler in /etc/jobrunner/scripts; the runner starts
-- as that user with a token file in /etc/jobrunner/tokens (and refuses one
-- others may read); the C library
-- and the Lua module push jobs; purge removes the state and the
-- configuration. The teardown purges whatever is still installed, and
-- removes the jobrunner user if this spec created it, so the machine is
-- left as it was, failed test or not.
--
-- JR_DEB_BUILT names a directory where `make deb` already built the
-- packages, with its output in make.out beside them (.ci/run builds them
-- once for this spec and .ci/deb-check): their files and lintian's
-- verdict are checked there instead of building them again.
--
-- Needs root (CI runs as root); skipped, with a message, when not root,
-- when JR_SKIP_DEB=1, or when a jobrunner package, /etc/jobrunner or
-- /var/lib/jobrunner is already there (an operator's, never touched).
local h = require "jr"
local q = h.quote

local PKGS = { "jobrunner", "libjobrunner0", "libjobrunner-dev",
               "lua-jobrunner" }
-- the packages' version: debian/changelog's first entry
local VERSION = io.open(h.root .. "/debian/changelog"):read("l"):match(
  "^jobrunner %(([^)]+)%)")
local ARCH = io.popen("dpkg --print-architecture 2>/dev/null"):read("l") or "amd64"
local CONF = "/etc/jobrunner/jobrunner.lua"
local HANDLER = "/etc/jobrunner/scripts/debspec.lua"
local TOKENS = "/etc/jobrunner/tokens"
local TOKEN_FILE = TOKENS .. "/debspec"
local STATE = "/var/lib/jobrunner"

local function trim(s) return (s:gsub("%s+$", "")) end

local function ok(cmd)
  local _, _, code = h.sh(cmd)
  return code == 0
end

-- Why this spec cannot run here, or nil.
local function skip_reason()
  if os.getenv("JR_SKIP_DEB") == "1" then return "JR_SKIP_DEB=1" end
  if trim(h.sh("id -u")) ~= "0" then
    return "not root (dpkg -i needs it; CI runs as root)"
  end
  for _, tool in ipairs({ "dpkg-buildpackage", "dh", "setpriv" }) do
    if not ok("command -v " .. tool) then
      return tool .. " not found (make deps installs it)"
    end
  end
  for _, p in ipairs(PKGS) do
    local st = h.sh("dpkg-query -W -f='${db:Status-Abbrev}' " .. p ..
      " 2>/dev/null")
    if st:match("^.[^n]") then
      return "package " .. p .. " is already on this machine (" ..
        trim(st) .. "): not replacing it"
    end
  end
  for _, path in ipairs({ "/etc/jobrunner", STATE }) do
    if ok("test -e " .. q(path)) then
      return path .. " exists: not touching an installed runner's files"
    end
  end
end

-- make in the repository, without what an outer make exported.
local function make(args)
  return h.sh(("cd %s && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BUILD " ..
    "-u SANITIZE make %s"):format(q(h.root), args))
end

-- dpkg, waiting (up to 90 s) for its lock when apt or another dpkg holds it.
local function dpkg(args)
  local deadline = h.now() + 90
  while true do
    local out, err, code = h.sh("dpkg " .. args)
    if code == 0 or not (err .. out):find("lock", 1, true)
        or h.now() > deadline then
      return out, err, code
    end
    h.sleep(1)
  end
end

-- A command as the jobrunner user (its uid, gid and groups, its home).
-- One simple command after the cd: with "&" appended, $! is its pid (env
-- and setpriv exec), the runner's own.
local function as_runner(cmd)
  return ("cd %s; env HOME=%s setpriv --reuid=jobrunner --regid=jobrunner" ..
    " --init-groups %s"):format(q(STATE), q(STATE), cmd)
end

local function installed(p)
  return h.sh("dpkg-query -W -f='${db:Status-Abbrev}' " .. p ..
    " 2>/dev/null"):match("^.[^n]") ~= nil
end

local reason = skip_reason()
if reason then
  describe("Debian packages", function()
    pending("deb_spec skipped: " .. reason)
  end)
  print("deb_spec: skipped: " .. reason)
  return
end

describe("Debian packages", function()
  local built = os.getenv("JR_DEB_BUILT")
  if built == "" then built = nil end
  local deb = built or h.root .. "/build/deb"
  local had_user = ok("getent passwd jobrunner")
  local runner_pid, work

  lazy_setup(function()
    work = trim(h.sh("mktemp -d /tmp/jrdeb.XXXXXX"))
  end)

  lazy_teardown(function()
    if runner_pid then os.execute("kill -9 " .. runner_pid .. " 2>/dev/null") end
    os.remove(HANDLER)
    os.remove(TOKEN_FILE)
    local left = {}
    for _, p in ipairs(PKGS) do
      if installed(p) then left[#left + 1] = p end
    end
    if #left > 0 then dpkg("--purge " .. table.concat(left, " ")) end
    if not had_user and ok("getent passwd jobrunner") then
      os.execute("userdel jobrunner 2>/dev/null; groupdel jobrunner 2>/dev/null")
    end
    if work then os.execute("rm -rf " .. q(work)) end
  end)

  it("make deb builds the four packages and lintian passes them", function()
    local out, err, code
    if built then
      out = h.read_file(built .. "/make.out")
      assert.is_truthy(out, built .. "/make.out: no output of make deb")
    else
      out, err, code = make("deb")
      assert.equal(0, code, out .. err)
    end
    assert.matches("lintian: no error, no warning", out)
    local files = {
      jobrunner = { "./usr/bin/jobrunner", "./etc/jobrunner/jobrunner.lua",
                    "./etc/jobrunner/scripts/", "./etc/jobrunner/tokens/",
                    "./lib/systemd/system/jobrunner.service",
                    "./lib/systemd/system/jobrunner@.service",
                    "./usr/lib/sysusers.d/jobrunner.conf",
                    "./usr/lib/tmpfiles.d/jobrunner.conf",
                    "./usr/share/man/man1/jobrunner.1.gz",
                    "./usr/share/doc/jobrunner/examples/jobrunner.lua.example",
                    "./usr/share/doc/jobrunner/examples/jobrunner.rules.yml",
                    "./usr/share/doc/jobrunner/examples/sqlite-to-postgres.sh" },
      libjobrunner0 = { "/libjobrunner.so.0" },
      ["libjobrunner-dev"] = { "./usr/include/jobrunner.h",
                               "/libjobrunner.a", "/libjobrunner.so ->",
                               "/pkgconfig/jobrunner.pc" },
      ["lua-jobrunner"] = { "/lua/5.4/jobrunner.so" },
    }
    for pkg, want in pairs(files) do
      local path = ("%s/%s_%s_" .. ARCH .. ".deb"):format(deb, pkg, VERSION)
      local list, lerr, lcode = h.sh("dpkg-deb -c " .. q(path))
      assert.equal(0, lcode, lerr)
      for _, f in ipairs(want) do
        assert.is_truthy(list:find(f, 1, true), pkg .. " lacks " .. f)
      end
    end
    -- the runner's config is a conffile; nothing of the library in -dev
    local conff = h.sh("dpkg-deb --ctrl-tarfile " ..
      q(deb .. "/jobrunner_" .. VERSION .. "_" .. ARCH .. ".deb") ..
      " | tar -xOf - ./conffiles")
    assert.equal(CONF, trim(conff))
  end)

  local function install()
    local debs = {}
    for _, p in ipairs(PKGS) do
      debs[#debs + 1] = q(("%s/%s_%s_" .. ARCH .. ".deb"):format(deb, p, VERSION))
    end
    return dpkg("-i " .. table.concat(debs, " "))
  end

  it("installs: the jobrunner user, its state directory, no unit enabled", function()
    local out, err, code = install()
    assert.equal(0, code, out .. err)
    local pw = h.sh("getent passwd jobrunner")
    assert.matches("^jobrunner:x:%d+:%d+:[^:]*:/var/lib/jobrunner:" ..
      "/usr/sbin/nologin", pw)
    assert.equal("jobrunner jobrunner 700", trim(h.sh("stat -c '%U %G %a' " ..
      q(STATE))))
    -- it may hold a password: root writes it, the runner's group reads it
    assert.equal("root jobrunner 640", trim(h.sh("stat -c '%U %G %a' " ..
      q(CONF))))
    assert.matches("sqlite:/var/lib/jobrunner/jobs.db", h.read_file(CONF))
    -- the HTTP tokens' files: root writes them, the runner's group reads
    assert.equal("root jobrunner 750", trim(h.sh("stat -c '%U %G %a' " ..
      q(TOKENS))))
    -- installed, not enabled, not started: no wants link, no state
    assert.is_false(ok("test -e /etc/systemd/system/multi-user.target.wants/" ..
      "jobrunner.service"))
    assert.is_false(ok("deb-systemd-helper --quiet was-enabled jobrunner.service"))
    assert.equal("", h.sh("ls -A " .. q(STATE)))
  end)

  it("runs check and a job as the jobrunner user", function()
    h.write_file(HANDLER, [[
return function(job)
  local f = assert(io.open("/var/lib/jobrunner/debspec-" .. job.id, "w"))
  f:write("hello " .. job.payload.who)
  f:close()
end
]])
    local cli = "jobrunner -c " .. CONF
    local out, err, code = h.sh(as_runner(cli .. " check"))
    assert.equal(0, code, out .. err)
    assert.matches("1 handler loaded: debspec", out .. err)
    out, err, code = h.sh(as_runner(cli .. [[ push debspec '{"who":"deb"}']]))
    assert.equal(0, code, err)
    local id = assert(out:match("^(%d+)"), out)
    -- the runner, briefly, in the background
    local log = work .. "/runner.log"
    runner_pid = trim(h.sh(as_runner(cli .. " run") .. " >" .. q(log) ..
      " 2>&1 & echo $!"))
    local got = h.wait_file(STATE .. "/debspec-" .. id, 60,
      "the job's file (runner log: " .. log .. ")")
    assert.equal("hello deb", got)
    assert.equal("jobrunner", trim(h.sh("stat -c %U " ..
      q(STATE .. "/debspec-" .. id))))
    assert.equal("jobrunner", trim(h.sh("stat -c %U " .. q(STATE .. "/jobs.db"))))
    os.execute("kill -TERM " .. runner_pid)
    h.wait_for(function() return not ok("kill -0 " .. runner_pid) end, 60,
      "the runner to stop")
    runner_pid = nil
    assert.matches("stopped: 1 done, 0 failed", h.read_file(log))
  end)

  it("starts as the jobrunner user with a token file in /etc/jobrunner/tokens", function()
    local secret = "debspec-token-0123456789abcdef"
    h.sh(("umask 027 && printf '%%s\n' %s >%s && chgrp jobrunner %s"):format(
      q(secret), q(TOKEN_FILE), q(TOKEN_FILE)))
    assert.equal("root jobrunner 640", trim(h.sh("stat -c '%U %G %a' " ..
      q(TOKEN_FILE))))
    local conf = STATE .. "/tokens-spec.lua"
    h.write_file(conf, ([[return { backend = "sqlite:/var/lib/jobrunner/jobs.db",
  scripts = "/etc/jobrunner/scripts", http = { listen = "127.0.0.1:0", tokens = {
    { name = "debspec", scope = "read", token_file = %q } } } }
]]):format(TOKEN_FILE))
    h.sh("chown jobrunner:jobrunner " .. q(conf))
    local log = work .. "/tokens-runner.log"
    runner_pid = trim(h.sh(as_runner("jobrunner -c " .. conf .. " run") .. " >" ..
      q(log) .. " 2>&1 & echo $!"))
    local port = h.wait_for(function()
      return (h.read_file(log) or ""):match("http: listening on http://127%.0%.0%.1:(%d+)/")
    end, 60, "the runner's HTTP server (log: " .. log .. ")")
    local who = h.sh(("curl -s -H %s http://127.0.0.1:%s/api/whoami"):format(
      q("Authorization: Bearer " .. secret), port))
    assert.matches('"name":"debspec","scope":"read"', who, 1, true)
    os.execute("kill -TERM " .. runner_pid)
    h.wait_for(function() return not ok("kill -0 " .. runner_pid) end, 60,
      "the runner to stop")
    runner_pid = nil
    assert.is_nil(h.read_file(log):find(secret, 1, true))
    -- a token file others may read: refused at start, naming it and its mode
    h.sh("chmod 0644 " .. q(TOKEN_FILE))
    local out, err, code = h.sh(as_runner("jobrunner -c " .. conf .. " check"))
    assert.equal(3, code, out .. err)
    assert.matches(("'%s', which others may read or write (mode 0644)"):format(
      TOKEN_FILE), err, 1, true)
    os.remove(conf)
  end)

  it("builds a C producer with pkg-config and runs the Lua module", function()
    os.execute(("cp -r %s %s"):format(q(h.root .. "/examples/c-producer"),
      q(work)))
    local dir = work .. "/c-producer"
    local out, err, code = h.sh("env -u PKG_CONFIG_PATH make -C " .. q(dir) ..
      " producer")
    assert.equal(0, code, out .. err)
    assert.matches("/libjobrunner%.so%.0", h.sh("ldd " .. q(dir .. "/producer")))
    out, err, code = h.sh(q(dir .. "/producer") .. " sqlite:" ..
      q(work .. "/c.db"))
    assert.equal(0, code, err)
    assert.matches("pushed send_email as job 1\n", out)
    -- the Lua module from lua5.4's own path, not the tree's build/
    out, err, code = h.sh(("cd %s && env -u LUA_CPATH -u LUA_CPATH_5_4 " ..
      "lua5.4 -e %s"):format(q(work), q([[
local jr = require "jobrunner.client"
local db = assert(jr.open("sqlite:lua.db"))
local id = assert(db:push("x"))
print(package.searchpath("jobrunner", package.cpath), id)
]])))
    assert.equal(0, code, err)
    assert.matches("^/usr/lib/[^ ]*/lua/5%.4/jobrunner%.so%s+1\n", out)
  end)

  it("upgrades in place: the edited config and the database stay", function()
    local f = assert(io.open(CONF, "a"))
    f:write("-- edited by the administrator\n")
    f:close()
    local uid = h.sh("id -u jobrunner")
    local out, err, code = install()
    assert.equal(0, code, out .. err)
    assert.matches("edited by the administrator", h.read_file(CONF))
    assert.equal("root jobrunner 640", trim(h.sh("stat -c '%U %G %a' " ..
      q(CONF))))
    assert.equal(uid, h.sh("id -u jobrunner"))
    assert.equal("root jobrunner 750", trim(h.sh("stat -c '%U %G %a' " ..
      q(TOKENS))))
    assert.is_true(ok("test -s " .. q(STATE .. "/jobs.db")))
    out, err, code = h.sh(as_runner("jobrunner -c " .. CONF .. " stats --json"))
    assert.equal(0, code, err)
  end)

  it("removes, keeping state and configuration, then purges them", function()
    os.remove(HANDLER)
    os.remove(TOKEN_FILE)
    local out, err, code = dpkg("--remove lua-jobrunner libjobrunner-dev " ..
      "libjobrunner0 jobrunner")
    assert.equal(0, code, out .. err)
    assert.is_false(ok("test -e /usr/bin/jobrunner"))
    assert.is_true(ok("test -s " .. q(STATE .. "/jobs.db")), "remove lost the database")
    assert.is_true(ok("test -f " .. q(CONF)), "remove lost the config")
    out, err, code = dpkg("--purge lua-jobrunner libjobrunner-dev " ..
      "libjobrunner0 jobrunner")
    assert.equal(0, code, out .. err)
    for _, p in ipairs(PKGS) do
      assert.is_false(installed(p), p .. " still installed")
    end
    for _, path in ipairs({ STATE, "/etc/jobrunner", "/usr/bin/jobrunner",
                            "/lib/systemd/system/jobrunner.service" }) do
      assert.is_false(ok("test -e " .. q(path)), path .. " left after purge")
    end
    -- nothing owned by the user outside what purge removed
    assert.equal("", h.sh("find /etc /var/lib /usr/lib /usr/share -xdev " ..
      "-user jobrunner 2>/dev/null"))
  end)
end)
