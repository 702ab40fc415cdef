-- fairrows.lua - what the fair-queue specs read of the stored rows: each
-- job's state and fair tag by its payload's n, and a key's count of turns
-- taken (fair_keys.n), alike on both engines.
--
--   local fr = require "fairrows"
--   fr.rows(env)            -- { [n] = { state, tag or "-" } }, queue fq
--   fr.rows(env, "")        -- the same over every job
--   fr.key_n(env, "a")      -- key a's n in queue fq (nil: no row)
local cjson = require "cjson"

local M = {}

function M.null(v) return v == nil or v == cjson.null end

-- n -> {state, tag ("-" none)} of every job of queue fq, or of every job
-- when where is "" (else where is a SQL condition on jobs)
function M.rows(env, where)
  local n = env.backend == "postgres" and "(payload ->> 'n')::int"
    or "json_extract(payload, '$.n')"
  where = where or "queue = 'fq'"
  local out = {}
  for _, r in ipairs(env:query(("SELECT %s AS n, state, fair_tag AS tag"
      .. " FROM jobs %s ORDER BY id"):format(n,
        where == "" and "" or "WHERE " .. where))) do
    out[math.tointeger(r.n)] = { r.state, M.null(r.tag) and "-" or r.tag }
  end
  return out
end

function M.key_n(env, k, queue)
  local r = env:query(("SELECT n FROM fair_keys WHERE queue = '%s'"
    .. " AND key = '%s'"):format(queue or "fq", k))[1]
  return r and math.tointeger(r.n)
end

-- the place of value v in list t, or nil
function M.index_of(t, v)
  for i, x in ipairs(t) do if x == v then return i end end
end

return M
