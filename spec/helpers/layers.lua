-- layers.lua - the layer rules of the C tree as a function over a tree
-- (spec/layers_spec.lua runs it on the repository and on a broken copy).
-- It reads every .c and .h under runtime/ and backends/: the includes, and
-- the calls between files (which exported jr_* function each file names,
-- the function's folder found from its definition, "jr_x(" at the start of
-- a line as the style puts it). check(root) returns one line per
-- violation, "file:line: what", sorted:
--   - backend.h included outside db/, client/, cli/ and http/apidb*.[ch];
--   - master/master_int.h included outside master/ (services/ reach
--     the master through master/svc.h);
--   - Lua (lua.h, lauxlib.h, lualib.h) included in base/ or backends/;
--     these include rules hold through the tree's headers too;
--   - runtime/ naming its engine (ops->name, "sqlite", "postgres")
--     instead of asking a capability (caps.h);
--   - folders that include or call each other in a circle: each edge of a
--     cycle that goes up the layers (runtime/LAYERS, read below), with
--     every file and line that makes it (backends/*/ counts as
--     backends/: see unit below).
-- uses(root), at the end, checks the "Uses" sentences of the files'
-- header comments against their includes.
local lfs = require "lfs"

local M = {}

-- The folders scanned, as paths from the root: runtime/X and backends/
-- with backends/X below it.
local function folders(root)
  local out = {}
  for _, top in ipairs({ "runtime", "backends" }) do
    if lfs.attributes(root .. "/" .. top, "mode") == "directory" then
      if top == "backends" then out[#out + 1] = top end
      for e in lfs.dir(root .. "/" .. top) do
        local p = top .. "/" .. e
        if e:sub(1, 1) ~= "." and
           lfs.attributes(root .. "/" .. p, "mode") == "directory" then
          out[#out + 1] = p
        end
      end
    end
  end
  table.sort(out)
  return out
end

-- Every .c and .h file: { path, folder, lines }.
local function files(root)
  local out = {}
  for _, dir in ipairs(folders(root)) do
    local names = {}
    for e in lfs.dir(root .. "/" .. dir) do
      if e:match("%.[ch]$") then names[#names + 1] = e end
    end
    table.sort(names)
    for _, e in ipairs(names) do
      local lines = {}
      for line in io.lines(root .. "/" .. dir .. "/" .. e) do
        lines[#lines + 1] = line
      end
      out[#out + 1] = { path = dir .. "/" .. e, folder = dir, lines = lines }
    end
  end
  return out
end

-- The text of a line without its comments and string literals (state
-- carries an open /* */ across lines). Returns code, still in a comment.
local function strip(line, in_comment)
  local out, i = {}, 1
  while i <= #line do
    if in_comment then
      local e = line:find("*/", i, true)
      if not e then return table.concat(out), true end
      in_comment, i = false, e + 2
    else
      local c = line:sub(i, i)
      if line:sub(i, i + 1) == "/*" then
        in_comment, i = true, i + 2
      elseif line:sub(i, i + 1) == "//" then
        break
      elseif c == '"' or c == "'" then
        local j = i + 1
        while j <= #line and line:sub(j, j) ~= c do
          j = j + (line:sub(j, j) == "\\" and 2 or 1)
        end
        out[#out + 1] = " "
        i = j + 1
      else
        out[#out + 1] = c
        i = i + 1
      end
    end
  end
  return table.concat(out), in_comment
end

-- Where an include "name" of file f leads: its own folder first, then
-- runtime/ and backends/ (-Iruntime -Ibackends). nil: not in the tree.
local function resolve(root, f, name)
  for _, base in ipairs({ f.folder, "runtime", "backends" }) do
    local p = base .. "/" .. name
    if lfs.attributes(root .. "/" .. p, "mode") == "file" then return p end
  end
  return nil
end

-- The unit of the cycle rule a folder belongs to: each folder is its own,
-- but every engine's folder sits with backends/ (backend.c names their
-- ops tables).
local function unit(folder)
  return (folder:gsub("^backends/.*", "backends"))
end

local function folder_of(path)
  return unit(path:match("^(.*)/[^/]*$"))
end

local LUA_HEADERS = { ["lua.h"] = true, ["lauxlib.h"] = true,
                      ["lualib.h"] = true }

-- The include rules for one include of file f at line n (via: what the
-- message adds when the header is reached through another).
local function include_rules(f, n, name, target, bad, via)
  local at = f.path .. ":" .. n .. ": "
  local function add(what) bad[#bad + 1] = at .. what .. (via or "") end
  local top = f.folder:match("^[^/]+/?[^/]*")
  if target == "backends/backend.h" and f.folder ~= "backends" and
     not f.folder:match("^backends/") and
     f.folder ~= "runtime/db" and f.folder ~= "runtime/client" and
     f.folder ~= "runtime/cli" and not f.path:match("^runtime/http/apidb[a-z]*%.[ch]$") then
    add("includes backend.h (storage is reached from db/, client/, " ..
        "cli/ and http/apidb*.[ch] only)")
  end
  if target == "runtime/master/master_int.h" and
     f.folder ~= "runtime/master" then
    add("includes master/master_int.h (master/ only: services/ use " ..
        "master/svc.h)")
  end
  if LUA_HEADERS[name] and (top == "runtime/base" or
                            f.folder:match("^backends")) then
    add("includes " .. name .. " (base/ and backends/ use no Lua)")
  end
end

-- runtime/ asks what its engine can do (caps.h), never which one it is:
-- no engine's name read (ops->name) or compared ("sqlite", "postgres").
local function identity_rules(f, n, line, code, in_comment, bad)
  if not f.folder:match("^runtime/") then return end
  local what = code:match("ops%s*%->%s*name%f[^%w_]") or
               code:match("ops%s*%.%s*name%f[^%w_]")
  for _, word in ipairs({ '"sqlite"', '"postgres"', '"postgresql"' }) do
    local at = line:find(word, 1, true)
    local pre = at and line:sub(1, at - 1)
    if pre and not pre:find("//", 1, true) and
       not select(2, strip(pre, in_comment)) then
      what = word
    end
  end
  if what then
    bad[#bad + 1] = f.path .. ":" .. n .. ": asks which engine it talks " ..
                    "to (" .. what .. "): ask its capability (caps.h)"
  end
end

-- What a tree header includes, directly or through the tree's headers
-- it includes: a list of { name, target } (target nil: not in the tree),
-- each header once. The include rules hold for these too.
local function through(root, by_path, path)
  local out, seen = {}, { [path] = true }
  local function walk(f)
    for _, line in ipairs(f.lines) do
      local name = line:match('^%s*#%s*include%s*"([^"]+)"') or
                   line:match("^%s*#%s*include%s*<([^>]+)>")
      local target = name and line:match('"') and resolve(root, f, name)
      if name and not seen[target or name] then
        seen[target or name] = true
        out[#out + 1] = { name = name, target = target }
        if by_path[target or ""] then walk(by_path[target]) end
      end
    end
  end
  if by_path[path] then walk(by_path[path]) end
  return out
end

-- Which folder defines each exported function: "jr_x(" at the start of a
-- line (the return type stands on the line above). A name defined in
-- more than one folder is left out.
local function definitions(all)
  local def = {}
  for _, f in ipairs(all) do
    for _, line in ipairs(f.lines) do
      local name = line:match("^(jr_[%w_]+)%(")
      if name then
        if def[name] == nil or def[name] == unit(f.folder) then
          def[name] = unit(f.folder)
        else
          def[name] = false
        end
      end
    end
  end
  return def
end

-- The folder graph: edges[a][b] = list of "file:line (why)" from a to b.
local function graph(root, all, bad)
  local def, edges, by_path = definitions(all), {}, {}
  for _, f in ipairs(all) do by_path[f.path] = f end
  local function edge(f, n, to, why)
    local from = unit(f.folder)
    if not to or to == from then return end
    edges[from] = edges[from] or {}
    local list = edges[from][to] or {}
    edges[from][to] = list
    list[#list + 1] = f.path .. ":" .. n .. " " .. why
  end
  for _, f in ipairs(all) do
    local in_comment = false
    for n, line in ipairs(f.lines) do
      local quoted = line:match('^%s*#%s*include%s*"([^"]+)"')
      local angled = line:match("^%s*#%s*include%s*<([^>]+)>")
      if quoted then
        local target = resolve(root, f, quoted)
        include_rules(f, n, quoted, target, bad)
        for _, inner in ipairs(target and through(root, by_path, target)
                               or {}) do
          include_rules(f, n, inner.name, inner.target, bad,
                        " (through " .. quoted .. ")")
        end
        if target then
          edge(f, n, folder_of(target), 'includes "' .. quoted .. '"')
        end
      elseif angled then
        include_rules(f, n, angled, nil, bad)
      else
        local code, was = nil, in_comment
        code, in_comment = strip(line, in_comment)
        identity_rules(f, n, line, code, was, bad)
        if not line:match("^jr_[%w_]+%(") then
          for name in code:gmatch("[%w_]+") do
            if name:match("^jr_") and def[name] then
              edge(f, n, def[name], "calls " .. name)
            end
          end
        end
      end
    end
  end
  return edges
end

-- The strongly connected components of the graph with more than one
-- folder (Tarjan's algorithm).
local function cycles(nodes, edges)
  local index, low, on, stack, out, next_index = {}, {}, {}, {}, {}, 0
  local function visit(v)
    index[v], low[v], next_index = next_index, next_index, next_index + 1
    stack[#stack + 1], on[v] = v, true
    local outs = {}
    for w in pairs(edges[v] or {}) do outs[#outs + 1] = w end
    table.sort(outs)
    for _, w in ipairs(outs) do
      if index[w] == nil then
        visit(w)
        low[v] = math.min(low[v], low[w])
      elseif on[w] then
        low[v] = math.min(low[v], index[w])
      end
    end
    if low[v] == index[v] then
      local comp = {}
      repeat
        local w = table.remove(stack)
        on[w] = nil
        comp[#comp + 1] = w
      until w == v
      if #comp > 1 then
        table.sort(comp)
        out[#out + 1] = comp
      end
    end
  end
  for _, v in ipairs(nodes) do
    if index[v] == nil then visit(v) end
  end
  return out
end

local function short(folder)
  return (folder:gsub("^runtime/", "")) .. "/"
end

-- The repository's runtime/LAYERS, found from this file's place
-- (spec/helpers/): the layer names from the bottom, as the Makefile reads
-- them ("base", "backends", ...; "#" starts a comment).
local LAYERS_FILE = (debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
                     or ".") .. "/../../runtime/LAYERS"

function M.order()
  local names = {}
  for line in io.lines(LAYERS_FILE) do
    for name in line:gsub("#.*", ""):gmatch("%S+") do
      names[#names + 1] = name
    end
  end
  return names
end

-- The layers from the bottom up as folders: a folder uses only those
-- below it. Every cycle has an edge that goes up this list, and each edge
-- between two folders of one cycle lies on a cycle; so the edges up are
-- the ones to name. http/ sits below master/: the master starts the server
-- and hands it a host interface, the server never reaches into the master.
local RANK = {}
for i, v in ipairs(M.order()) do
  local folder = v == "backends" and v or "runtime/" .. v
  if unit(folder) == folder then RANK[folder] = i end
end

-- Whether the edge a -> b of a cycle is to be named: it goes up the
-- layers, or the cycle has a folder outside runtime/LAYERS (then every
-- edge is).
local function named(comp, a, b)
  for _, v in ipairs(comp) do
    if not RANK[v] then return true end
  end
  return RANK[a] < RANK[b]
end

-- Each edge of a cycle that goes up the layers, with every place that
-- makes it.
local function cycle_rules(comps, edges, bad)
  for _, comp in ipairs(comps) do
    local names, member = {}, {}
    for _, v in ipairs(comp) do
      names[#names + 1] = short(v)
      member[v] = true
    end
    local what = "folders in a cycle (" .. table.concat(names, " ") .. "): "
    for _, a in ipairs(comp) do
      for b, list in pairs(edges[a] or {}) do
        if member[b] and named(comp, a, b) then
          for _, where in ipairs(list) do
            local file_line, why = where:match("^(%S+) (.*)$")
            bad[#bad + 1] = file_line .. ": " .. what .. short(a) ..
                            " -> " .. short(b) .. ": " .. why
          end
        end
      end
    end
  end
end

-- Returns the violations of the tree at root, sorted, one per line
-- ("file:line: what"); an empty list when it keeps every rule.
function M.check(root)
  local bad, all = {}, files(root)
  local edges = graph(root, all, bad)
  local nodes = {}
  for _, f in ipairs(all) do
    local u = unit(f.folder)
    if not nodes[u] then
      nodes[u] = true
      nodes[#nodes + 1] = u
    end
  end
  cycle_rules(cycles(nodes, edges), edges, bad)
  table.sort(bad)
  return bad
end

-- The folder graph itself, for a reader: "a/ -> b/" lines, sorted.
function M.edges(root)
  local bad, lines = {}, {}
  local edges = graph(root, files(root), bad)
  for a, to in pairs(edges) do
    for b in pairs(to) do lines[#lines + 1] = short(a) .. " -> " .. short(b) end
  end
  table.sort(lines)
  return lines
end


-- The "Uses" sentences of the files' header comments, checked: in the
-- first comment of each .c and .h, a sentence that starts "Uses " names
-- the headers (x.h) and files (x.c) the file works with. Each header
-- named must be in reach of the file's includes (directly or through the
-- tree's headers it includes; for a header, also those of its own .c)
-- and each file named must exist in the tree. Returns one line per
-- stale name, "file: Uses names x.h, which it does not include", sorted.
function M.uses(root)
  local all, by_path, by_name = files(root), {}, {}
  for _, f in ipairs(all) do
    f.name = f.path:match("[^/]+$")
    by_path[f.path], by_name[f.name] = f, true
  end
  local function reach(f, seen)
    for _, line in ipairs(f.lines) do
      local name = line:match('^%s*#%s*include%s*"([^"]+)"')
      local target = name and by_path[resolve(root, f, name) or ""]
      if target and not seen[target.name] then
        seen[target.name] = true
        reach(target, seen)
      end
    end
    return seen
  end
  local bad = {}
  for _, f in ipairs(all) do
    local head = table.concat(f.lines, "\n"):match("^/%*.-%*/") or ""
    head = head:gsub("\n%s*%*", " ")
    local seen
    for uses in head:gmatch("Uses%s(.-)%.%f[%s%z*]") do
      if not seen then
        seen = reach(f, {})
        local own = by_path[f.path:gsub("%.h$", ".c")]
        if own and own ~= f then reach(own, seen) end
      end
      for name in (uses .. "."):gmatch("([%w_]+%.[ch])%f[^%w_]") do
        if name ~= f.name and name:match("%.h$") and not seen[name] then
          bad[#bad + 1] = f.path .. ": Uses names " .. name ..
                          ", which it does not include"
        elseif name:match("%.c$") and not by_name[name] then
          bad[#bad + 1] = f.path .. ": Uses names " .. name ..
                          ", which is no file of the tree"
        end
      end
    end
  end
  table.sort(bad)
  return bad
end

return M
