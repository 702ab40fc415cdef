return { defaults = { max_retries = 3, timeout = 0.5, backoff = 10 } }
