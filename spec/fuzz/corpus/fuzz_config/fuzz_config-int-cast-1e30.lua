return { max_payload = 1e30 }
