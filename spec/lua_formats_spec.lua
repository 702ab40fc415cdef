-- lua_formats_spec.lua - the formats given to Lua's own formatters in C
-- (lua_pushfstring, lua_pushvfstring, luaL_error) use only the conversions
-- Lua 5.4 knows: %% %s %f %I %p %d %c %U, with no flag, width or length
-- (no %g, %lld, %zu, %.3f). Lua raises "invalid conversion" for another,
-- and that message replaces the one meant (an option's name, "timed out
-- after 2s"); gcc cannot see it, as these functions carry no format
-- attribute. The scan runs on the tree's C sources, and on small texts
-- that break the rule, to show that it finds them.
local lfs = require "lfs"

local FUNCS = { "lua_pushfstring", "lua_pushvfstring", "luaL_error" }
local OK = { ["%"] = true, s = true, f = true, I = true, p = true, d = true,
             c = true, U = true }

-- The text with comments blanked (kept the same length, newlines kept, so
-- that positions still give the line).
local function uncomment(src)
  return (src:gsub("/%*.-%*/", function(c) return (c:gsub("[^\n]", " ")) end))
end

-- Reads the arguments of the call whose "(" is at i: a list of { text,
-- fmt } where fmt is the concatenation of the argument's string literals.
local function call_args(src, i)
  local args, depth, cur, lits, j = {}, 0, {}, {}, i + 1
  local function close()
    args[#args + 1] = { text = table.concat(cur), fmt = table.concat(lits) }
    cur, lits = {}, {}
  end
  while j <= #src do
    local c = src:sub(j, j)
    if c == '"' or c == "'" then
      local k = j + 1
      while src:sub(k, k) ~= c do
        if src:sub(k, k) == "\\" then k = k + 1 end
        k = k + 1
        assert(k <= #src, "unterminated literal")
      end
      if c == '"' and depth == 0 then lits[#lits + 1] = src:sub(j + 1, k - 1) end
      cur[#cur + 1] = src:sub(j, k)
      j = k
    elseif c == "(" or c == "{" or c == "[" then
      depth = depth + 1
      cur[#cur + 1] = c
    elseif c == ")" or c == "}" or c == "]" then
      if depth == 0 then close(); return args end
      depth = depth - 1
      cur[#cur + 1] = c
    elseif c == "," and depth == 0 then
      close()
    else
      cur[#cur + 1] = c
    end
    j = j + 1
  end
  error("unterminated call")
end

-- The problems in one C text, as "name:line: ..." strings.
local function scan(name, src)
  local bad = {}
  src = uncomment(src)
  for _, fn in ipairs(FUNCS) do
    local from = 1
    while true do
      local s, e = src:find("%f[%w_]" .. fn .. "%s*%(", from)
      if not s then break end
      from = e + 1
      local line = select(2, src:sub(1, s):gsub("\n", "")) + 1
      local args = call_args(src, e)
      local fmt = args[2] and args[2].fmt or ""
      if fmt ~= "" then
        local n, k = 0, 1
        while true do
          local p = fmt:find("%", k, true)
          if not p then break end
          local spec = fmt:match("^[-+ #0-9.*]*[hlLqjzt]*.", p + 1) or ""
          if not OK[spec] then
            bad[#bad + 1] = ("%s:%d: %s: conversion '%%%s' (Lua knows %%%% %%s " ..
              "%%f %%I %%p %%d %%c %%U)"):format(name, line, fn, spec)
          end
          if spec ~= "%" then n = n + 1 end
          k = p + 1 + math.max(#spec, 1)
        end
        if fn ~= "lua_pushvfstring" and #args - 2 ~= n then
          bad[#bad + 1] = ("%s:%d: %s: %d conversions, %d arguments"):format(
            name, line, fn, n, #args - 2)
        end
      end
    end
  end
  local order = {}
  for i, b in ipairs(bad) do order[b] = i end
  table.sort(bad, function(a, b)
    local la, lb = tonumber(a:match(":(%d+):")), tonumber(b:match(":(%d+):"))
    if la ~= lb then return la < lb end
    return order[a] < order[b]
  end)
  return bad
end

local function walk(dir, out)
  for e in lfs.dir(dir) do
    local path = dir .. "/" .. e
    if e ~= "." and e ~= ".." then
      if lfs.attributes(path, "mode") == "directory" then
        walk(path, out)
      elseif e:match("%.[ch]$") then
        out[#out + 1] = path
      end
    end
  end
  return out
end

describe("formats of Lua's formatters in C", function()
  it("use only the conversions Lua knows, one argument each, in the tree", function()
    local bad, files = {}, {}
    for _, dir in ipairs({ "runtime", "backends", "spec", "bench", "examples" }) do
      if lfs.attributes(dir, "mode") == "directory" then walk(dir, files) end
    end
    assert.is_true(#files > 50)
    for _, path in ipairs(files) do
      local f = assert(io.open(path))
      local src = f:read("a")
      f:close()
      for _, b in ipairs(scan(path, src)) do bad[#bad + 1] = b end
    end
    assert.same({}, bad)
  end)

  it("finds %g, %lld, %zu, a width and a missing argument", function()
    local bad = scan("x.c", [[
/* luaL_error(L, "%g in a comment is not a call") */
static int f(lua_State *L) {
    lua_pushfstring(L, "%s: %d (%f) %I %p %c %U 100%%", a, 1, 2.0,
                    (lua_Integer)3, p, 'c', 4);
    luaL_error(L, "timed out after %gs", secs);
    luaL_error(L, "job %lld cancelled", (long long)id);
    lua_pushfstring(L, "%zu bytes"
                    " of %.3f", n, x);
    lua_pushfstring(L, "%s and %s", f(a, b));
    return luaL_error(L, "plain text");
}
]])
    assert.equal(5, #bad, table.concat(bad, "\n"))
    assert.truthy(bad[1]:find("x.c:5: luaL_error: conversion '%g'", 1, true))
    assert.truthy(bad[2]:find("x.c:6: luaL_error: conversion '%lld'", 1, true))
    assert.truthy(bad[3]:find("x.c:7: lua_pushfstring: conversion '%zu'", 1, true))
    assert.truthy(bad[4]:find("x.c:7: lua_pushfstring: conversion '%.3f'", 1, true))
    assert.truthy(bad[5]:find("x.c:9: lua_pushfstring: 2 conversions, 1 arguments",
                              1, true))
  end)
end)
