return { backend = "sqlite:\0nul" }
