-- hello: the first handler. Push it with
--   ./jobrunner push hello '{"name":"world"}'
return function(job)
  print(("hello, %s! (job %d, attempt %d)"):format(
    job.payload.name or "stranger", job.id, job.attempt))
end
