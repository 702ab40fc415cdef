return { memory_limit = 1, max_jobs_per_worker = 0, wait_for_db = true }
