return { log = { level = "loud" } }
