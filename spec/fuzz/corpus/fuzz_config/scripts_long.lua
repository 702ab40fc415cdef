return { scripts = string.rep("a", 5000) }
