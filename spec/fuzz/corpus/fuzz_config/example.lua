-- jobrunner.lua - the runner's configuration. Copy to ./jobrunner.lua (or
-- pass -c FILE). It is Lua run once at start; it must return a table. Every
-- key is optional; the values below are the defaults. An unknown key is an
-- error that names it, with its file:line.
return {
  -- Where jobs live: "sqlite:PATH" (embedded, the default) or a PostgreSQL
  -- URL / conninfo such as "postgresql://runner:secret@db.internal/app".
  -- Passwords are masked ("****") wherever the URL is logged.
  backend = "sqlite:jobrunner.db",

  -- PostgreSQL only: the schema holding jobrunner's table and functions.
  schema = "jobrunner",

  -- The handler directory: scripts/NAME.lua handles jobs named NAME,
  -- scripts/a/b.lua handles "a.b"; files starting with _ are helpers.
  scripts = "scripts",

  -- Worker processes; the default is the number of cores. Each runs one
  -- job at a time. A table lets the count follow the load: a worker is
  -- added while jobs wait and all are busy, and retired after idle_timeout
  -- seconds idle. on_tick (below) may set the target.
  concurrency = { min = 1, max = 4 },
  idle_timeout = 30,

  defaults = {
    -- Retries after the first attempt, unless the job or its handler says
    -- otherwise. A job dies after 1 + max_retries attempts.
    max_retries = 20,
    -- Seconds a handler may run. Past it the handler gets an error it
    -- cannot swallow; 5 s later its worker is killed. Either way the job
    -- fails with "timed out after Ns".
    timeout = 900,
    -- Delay before a retry: seconds, or function(attempt, error) returning
    -- seconds. Unset: attempt^4 + 15 s plus jitter (see docs/handlers.md).
    -- backoff = function(attempt, err) return 30 * attempt end,
  },

  -- Seconds a claimed job stays leased to this runner without renewal
  -- (renewed every lease/3). If the runner dies, any runner requeues the
  -- job once the lease has expired (checked every lease/2).
  lease = 30,

  -- Seconds between fallback polls. Pushes wake the runner at once (inotify
  -- on SQLite's WAL, LISTEN/NOTIFY on PostgreSQL); the poll catches jobs
  -- scheduled for later.
  poll_interval = 1,

  -- Seconds running jobs get to finish after SIGTERM/SIGINT. Jobs still
  -- running then go back to the queue.
  shutdown_timeout = 25,

  -- Largest payload accepted at push, in bytes.
  max_payload = 1048576,

  -- SQLite only: "full" makes every commit durable across power loss;
  -- "normal" is faster and can lose the last commits on power loss (never
  -- corrupts).
  synchronous = "full",

  -- SQLite only: seconds to wait for another process's write lock.
  busy_timeout = 5,

  -- Reload handlers when a file under scripts/ changes (inotify). SIGHUP
  -- and `jobrunner reload` always work.
  watch = true,

  -- Where `jobrunner reload` finds this runner's pid. Default: next to a
  -- SQLite database ("jobrunner.db.pid"), else "jobrunner.pid".
  -- pid_file = "/run/jobrunner.pid",

  -- Retry delay for every handler without its own backoff.
  -- backoff = function(job, attempt, err) return 30 * attempt end,

  -- Seconds between on_tick hooks.
  tick_interval = 5,

  -- Lifecycle hooks, run in the runner's master process. A hook that fails
  -- or loops is logged and never stops jobs. See docs/configuration.md, "Hooks".
  hooks = {
    on_job_dead = function(e)
      io.stderr:write(("job %d (%s) is dead: %s\n"):format(e.id, e.name,
        e.error:match("[^\n]*")))
    end,
    -- A concurrency policy: all workers while a backlog builds, fewer when
    -- most jobs fail (a downstream service is down, say).
    on_tick = function(t)
      if t.failure_rate > 0.5 then return t.workers.min end
      if t.backlog > 10 * t.workers.total then return t.workers.max end
    end,
  },

  log = {
    level = "info",     -- "debug", "info", "warn" or "error"
    format = "text",    -- "text" or "json" (one object per line)
  },
}
