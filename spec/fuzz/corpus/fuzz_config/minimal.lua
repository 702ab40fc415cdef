return { backend = "sqlite:jobs.db", scripts = "scripts" }
