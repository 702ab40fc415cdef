-- /etc/jobrunner/jobrunner.lua - the configuration of jobrunner.service
-- (Debian package). Every key, with its default and range, is described
-- in /usr/share/doc/jobrunner/examples/jobrunner.lua.example and
-- jobrunner(1). It is Lua run once at start and must return a table; an
-- unknown key is an error naming it and its file:line.
--
-- The service does not start until you enable it:
--   1. write handlers in /etc/jobrunner/scripts (NAME.lua runs jobs NAME)
--   2. sudo -u jobrunner jobrunner -c /etc/jobrunner/jobrunner.lua check
--   3. sudo systemctl enable --now jobrunner
-- Run the command line as the jobrunner user with this file
-- (sudo -u jobrunner jobrunner -c /etc/jobrunner/jobrunner.lua push ...),
-- so that a SQLite database it creates belongs to that user.
return {
  -- SQLite in the service's state directory (the only directory the unit
  -- lets the runner write). For PostgreSQL: "postgresql://runner@db/app"
  -- (a password is best kept in ~jobrunner/.pgpass or JOBRUNNER_BACKEND;
  -- this file is root:jobrunner 0640: root and the runner read it).
  backend = "sqlite:/var/lib/jobrunner/jobs.db",

  -- The handlers: files of the administrator, kept in /etc with the rest
  -- of the configuration, owned by root and only read by the runner.
  scripts = "/etc/jobrunner/scripts",

  -- The HTTP server: /metrics, the dashboard, the JSON API. Off until set.
  -- Its tokens (writes need one, and any address but loopback), each in a
  -- file of /etc/jobrunner/tokens (0750 root:jobrunner), which others may
  -- not read (the runner refuses to start otherwise):
  --   sudo sh -c 'umask 027; head -c 32 /dev/urandom | base64 >/etc/jobrunner/tokens/ops'
  --   sudo chgrp jobrunner /etc/jobrunner/tokens/ops
  -- Each has a name (logs and the dashboard show it, never the secret)
  -- and a scope: read (GET and /metrics), push (to its queues), write.
  -- http = { listen = "127.0.0.1:8089", tokens = {
  --   { name = "ops", scope = "write", token_file = "/etc/jobrunner/tokens/ops" },
  --   { name = "grafana", scope = "read", token_file = "/etc/jobrunner/tokens/grafana" },
  -- } },
}
