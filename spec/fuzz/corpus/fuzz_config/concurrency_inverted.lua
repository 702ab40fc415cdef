return { concurrency = { min = 2, max = 1 } }
