return { log = { level = "debug", format = "json" } }
