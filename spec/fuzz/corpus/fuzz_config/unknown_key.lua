return { colour = "blue" }
