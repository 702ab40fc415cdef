-- debdeps_spec: what the runner needs, against the two lists that bring
-- it onto a fresh Debian: the Makefile's DEB_RUN_PKGS (make run, make
-- deps-run; DEB_DEB_PKGS too for make deb) and debian/control (the
-- packages' Build-Depends and Depends). Found from the tree and the built
-- binary, not listed here, so a new need fails this spec until the lists
-- have it:
--   - each pkg-config module the build links (the Makefile's PKGS): the
--     package of its .pc file is in Build-Depends, and everything
--     Build-Depends names is installed by make deb;
--   - each shared library the runner links (objdump's NEEDED, the file
--     ldd finds, its package by dpkg -S) comes with DEB_RUN_PKGS (a -dev
--     package there depends on it) unless every Debian root has it
--     (Priority: required); the package's Depends has ${shlibs:Depends};
--   - each Lua module the runtime's C code requires (require "NAME" in
--     Lua text, or lua_getglobal(L, "require") then the name), found on
--     this machine by lua5.4's package.searchpath, its package by
--     dpkg -S: in jobrunner's Depends and in DEB_RUN_PKGS (the producer
--     module's sources, LUAMOD_SRCS: in lua-jobrunner's Depends,
--     Recommends or Suggests);
--   - each file of a package the runtime opens (an absolute path under
--     /usr, /etc, /lib or /var/lib in its C strings, such as
--     /usr/share/zoneinfo) and libcurl's CA bundle (curl-config --ca,
--     jobrunner.http's https): its package in jobrunner's Depends and in
--     DEB_RUN_PKGS.
-- Needs dpkg, lua5.4 and curl-config (Debian, make deps); pending without.
local h = require "jr"
local q = h.quote

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

local function ok(cmd)
  local _, _, code = h.sh(cmd)
  return code == 0
end

local missing_tool
for _, tool in ipairs({ "dpkg-query", "objdump", "ldd", "lua5.4",
                        "curl-config", "pkg-config" }) do
  if not ok("command -v " .. tool) then missing_tool = tool end
end
if missing_tool then
  describe("the runner's Debian dependencies", function()
    pending("debdeps_spec skipped: no " .. missing_tool .. " here")
  end)
  return
end

-- A variable of the Makefile, as make expands it.
local function make_var(name)
  local out, err, code = h.sh(("cd %s && env -u MAKEFLAGS -u MFLAGS " ..
    "-u MAKELEVEL make -s --no-print-directory --eval " ..
    "'jr-print-%%: ; @echo $($*)' jr-print-%s"):format(q(h.root), name))
  assert(code == 0, "make jr-print-" .. name .. ": " .. err)
  return trim(out)
end

local function words(s)
  local t = {}
  for w in s:gmatch("%S+") do t[#t + 1] = w end
  return t
end

local function set(list)
  local t = {}
  for _, v in ipairs(list) do t[v] = true end
  return t
end

-- debian/control as paragraphs: { Source = {...}, jobrunner = {...} },
-- each field's continuation lines joined.
local function control()
  local paras, cur, last = {}, nil, nil
  for line in (h.read_file(h.root .. "/debian/control") .. "\n"):gmatch(
      "([^\n]*)\n") do
    if line:match("^%s*$") then
      cur = nil
    elseif line:match("^%s") and cur and last then
      cur[last] = cur[last] .. " " .. trim(line)
    else
      local k, v = line:match("^([%w%-]+):%s*(.*)$")
      if k then
        if not cur then cur = {}; paras[#paras + 1] = cur end
        cur[k] = v
        last = k
      end
    end
  end
  local by = {}
  for _, p in ipairs(paras) do
    by[p.Package or "Source"] = p
  end
  return by
end

-- The package names of a relation field ("a (>= 1) | b, c:any"): every
-- alternative, without versions and architectures.
local function relation(field)
  local t = {}
  for alt in (field or ""):gmatch("[^,|]+") do
    local name = trim(alt):match("^([%w%.%+%-]+)")
    if name then t[name] = true end
  end
  return t
end

-- The package owning path (tried as it is, resolved, and with and
-- without /usr, as merged /usr lists it either way); nil when none.
local function owner(path)
  local real = trim(h.sh("realpath -m " .. q(path)))
  local tries = { path, real }
  for _, p in ipairs({ path, real }) do
    tries[#tries + 1] = p:match("^/usr(/.*)$") or ("/usr" .. p)
  end
  for _, p in ipairs(tries) do
    local out, _, code = h.sh("dpkg -S " .. q(p) .. " 2>/dev/null")
    if code == 0 then
      local pkg = out:match("^([^:,]+)")
      if pkg then return trim(pkg) end
    end
  end
end

local function priority(pkg)
  return trim(h.sh("dpkg-query -W -f='${Priority}' " .. q(pkg) ..
    " 2>/dev/null"))
end

-- The packages' names in list, with what each directly depends on and
-- provides.
local function with_depends(list)
  local t = {}
  for _, p in ipairs(list) do
    t[p] = true
    local out = h.sh("dpkg-query -W -f='${Depends}, ${Pre-Depends}, " ..
      "${Provides}' " .. q(p) .. " 2>/dev/null")
    for name in pairs(relation(out)) do t[name] = true end
  end
  return t
end

-- The C sources of runtime/ and backends/, comments removed.
local function sources()
  local files = {}
  local p = io.popen("cd " .. q(h.root) .. " && find runtime backends " ..
    "-name '*.c' | sort")
  for f in p:lines() do
    local text = h.read_file(h.root .. "/" .. f)
    -- comments out, their newlines kept so line numbers stay right
    text = text:gsub("/%*.-%*/", function(c) return (c:gsub("[^\n]", " ")) end)
    files[#files + 1] = { name = f, text = text }
  end
  p:close()
  return files
end

local function line_at(text, pos)
  local n = 1
  for _ in text:sub(1, pos):gmatch("\n") do n = n + 1 end
  return n
end

-- The Lua modules required by the C text of f: { {name, where} }.
local function requires(f)
  local found = {}
  local function add(pos, name)
    found[#found + 1] = { name = name, where = f.name .. ":" ..
      line_at(f.text, pos) }
  end
  -- lua_getglobal(L, "require") and the name pushed after it
  for pos in f.text:gmatch('()lua_getglobal%s*%(%s*[%w_]+%s*,%s*"require"%s*%)') do
    local after = f.text:sub(pos, pos + 300)
    local name = after:match('lua_push%a+%s*%(%s*[%w_]+%s*,%s*"([^"]+)"')
    add(pos, name or "?")
  end
  -- require in Lua text inside C strings: require \"x\", require('x')
  for pos, name in f.text:gmatch([=[()require%s*%(?%s*\?["']([%w_%.]+)\?["']]=]) do
    add(pos, name)
  end
  return found
end

local LUA_STD = set({ "string", "table", "math", "io", "os", "coroutine",
                      "utf8", "debug", "package", "_G" })

-- The file lua5.4 would load for module name, or nil.
local function lua_module_file(name)
  local out = h.sh("lua5.4 -e " .. q(("print(package.searchpath(%q, " ..
    "package.path) or package.searchpath(%q, package.cpath) or '')"):format(
    name, name)))
  out = trim(out)
  return out ~= "" and out or nil
end

-- Files no package owns, made by a package's scripts.
local MADE_BY = {
  ["/etc/ssl/certs/ca-certificates.crt"] = "ca-certificates",
}

describe("the runner's Debian dependencies", function()
  local ctl = control()
  local run_pkgs = words(make_var("DEB_RUN_PKGS"))
  local deb_pkgs = words(make_var("DEB_DEB_PKGS"))
  local luamod = set(words(make_var("LUAMOD_SRCS")))
  local runner = ctl.jobrunner
  local depends = relation(runner.Depends)
  local run_set = set(run_pkgs)

  it("Build-Depends names the package of every pkg-config module the build links", function()
    local build = relation(ctl.Source["Build-Depends"])
    local mods = words(make_var("PKGS"))
    assert.is_true(#mods > 0)
    for _, m in ipairs(mods) do
      local pc = trim(h.sh("pkg-config --path " .. q(m)))
      assert.is_true(pc ~= "", "pkg-config finds no " .. m)
      local pkg = owner(pc)
      assert.is_truthy(pkg, "no package owns " .. pc)
      assert.is_true(build[pkg] or false, ("pkg-config module '%s' (%s) " ..
        "is in %s, not in debian/control's Build-Depends"):format(m, pc, pkg))
    end
  end)

  it("make deb installs everything Build-Depends names (DEB_RUN_PKGS, DEB_DEB_PKGS)", function()
    local have = with_depends(deb_pkgs)
    for p in pairs(with_depends(run_pkgs)) do have[p] = true end
    for p in pairs(relation(ctl.Source["Build-Depends"])) do
      assert.is_true(have[p] or false, ("Build-Depends names '%s', which " ..
        "neither DEB_RUN_PKGS nor DEB_DEB_PKGS installs"):format(p))
    end
  end)

  it("every shared library the runner links comes with DEB_RUN_PKGS", function()
    assert.is_truthy(runner.Depends:find("${shlibs:Depends}", 1, true))
    local have = with_depends(run_pkgs)
    local needed = {}
    for lib in h.sh("objdump -p " .. q(h.bin)):gmatch("NEEDED%s+(%S+)") do
      -- a sanitizer build (make asan) links the sanitizers' runtimes,
      -- which the package's build never does
      if not lib:match("^lib%a*san%.so") then needed[#needed + 1] = lib end
    end
    assert.is_true(#needed > 0)
    local ldd = h.sh("ldd " .. q(h.bin))
    for _, lib in ipairs(needed) do
      local path = ldd:match("\t" .. lib:gsub("%p", "%%%0") .. " => (%S+)")
      assert.is_truthy(path, "ldd does not find " .. lib)
      local pkg = assert(owner(path), "no package owns " .. path)
      pkg = pkg:gsub(":.*$", "")
      assert.is_true(have[pkg] or priority(pkg) == "required",
        ("the runner links %s (%s, package %s): no package of " ..
         "DEB_RUN_PKGS brings it"):format(lib, path, pkg))
    end
  end)

  it("every Lua module the runtime requires is in the package's Depends and DEB_RUN_PKGS", function()
    local lua_pkg = ctl["lua-jobrunner"]
    local lua_rel = relation(table.concat({ lua_pkg.Depends or "",
      lua_pkg.Recommends or "", lua_pkg.Suggests or "" }, ", "))
    local problems = {}
    for _, f in ipairs(sources()) do
      for _, r in ipairs(requires(f)) do
        local name = r.name
        if not (LUA_STD[name] or name == "jobrunner" or
                name:match("^jobrunner%.")) then
          local file = lua_module_file(name)
          local pkg = file and owner(file)
          if not pkg then
            problems[#problems + 1] = ("%s requires Lua module '%s', which " ..
              "no installed package provides"):format(r.where, name)
          elseif luamod[f.name] then
            if not lua_rel[pkg] then
              problems[#problems + 1] = ("%s requires Lua module '%s' " ..
                "(package %s): not in lua-jobrunner's Depends, Recommends " ..
                "or Suggests"):format(r.where, name, pkg)
            end
          else
            if not depends[pkg] then
              problems[#problems + 1] = ("%s requires Lua module '%s' " ..
                "(package %s): not in jobrunner's Depends"):format(r.where,
                name, pkg)
            end
            if not run_set[pkg] then
              problems[#problems + 1] = ("%s requires Lua module '%s' " ..
                "(package %s): not in DEB_RUN_PKGS"):format(r.where, name, pkg)
            end
          end
        end
      end
    end
    assert.same({}, problems)
  end)

  it("its scan finds a require in C, in either form", function()
    local text = table.concat({
      "/* require \"commented\" is no require */",
      "static void f(lua_State *L) {",
      '    lua_getglobal(L, "require");',
      '    lua_pushliteral(L, "somemodule");',
      '    luaL_dostring(L, "local x = require(\'other.mod\')\\n"',
      '                     "local y = require \\"third\\"");',
      "}" }, "\n")
    local f = { name = "x.c", text = text:gsub("/%*.-%*/", "") }
    local got = {}
    for _, r in ipairs(requires(f)) do got[#got + 1] = r.name .. "@" .. r.where end
    table.sort(got)
    assert.same({ "other.mod@x.c:5", "somemodule@x.c:3", "third@x.c:6" }, got)
  end)

  it("every package file the runtime opens (zoneinfo, the CA bundle) is in Depends and DEB_RUN_PKGS", function()
    local paths = {}
    for _, f in ipairs(sources()) do
      for pos, path in f.text:gmatch('()"(/[^"%s]*)') do
        path = path:gsub("[%).,;:]+$", "")
        if path:match("^/usr/") or path:match("^/etc/") or
           path:match("^/lib/") or path:match("^/var/lib/") then
          paths[#paths + 1] = { path = path, where = f.name .. ":" ..
            line_at(f.text, pos) }
        end
      end
    end
    local ca = trim(h.sh("curl-config --ca"))
    assert.is_true(ca ~= "", "curl-config --ca names no CA bundle")
    paths[#paths + 1] = { path = ca, where = "libcurl's CA bundle " ..
      "(curl-config --ca), for https in jobrunner.http" }
    local problems = {}
    for _, p in ipairs(paths) do
      local pkg = MADE_BY[p.path] or owner(p.path)
      if not pkg then
        problems[#problems + 1] = ("%s: no package owns %s"):format(p.where,
          p.path)
      else
        if not depends[pkg] then
          problems[#problems + 1] = ("%s: %s (package %s) is not in " ..
            "jobrunner's Depends"):format(p.where, p.path, pkg)
        end
        if not run_set[pkg] then
          problems[#problems + 1] = ("%s: %s (package %s) is not in " ..
            "DEB_RUN_PKGS"):format(p.where, p.path, pkg)
        end
      end
    end
    assert.same({}, problems)
  end)
end)
