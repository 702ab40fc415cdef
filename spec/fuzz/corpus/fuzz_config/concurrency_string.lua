return { concurrency = "many" }
