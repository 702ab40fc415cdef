return { pid_file = "/tmp/x.pid", watch = false, idle_timeout = 1, tick_interval = 0.1 }
