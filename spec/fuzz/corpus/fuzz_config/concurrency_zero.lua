return { concurrency = { min = 0, max = 0 } }
