return { concurrency = 4 }
