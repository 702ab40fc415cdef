return { defaults = { retries = 3 } }
