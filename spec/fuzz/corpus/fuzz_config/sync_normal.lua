return { synchronous = "normal", busy_timeout = 0 }
