return { max_payload = 2^63 }
