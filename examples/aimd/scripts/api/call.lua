-- api.call - stands for a call to a downstream service: it fails while
-- the file named by the payload's `down` (default "service.down") exists,
-- as a service that is down would.
return function(job)
  local down = job.payload.down or "service.down"
  local f = io.open(down)
  if f then
    f:close()
    error("service unavailable (" .. down .. " exists)")
  end
end
