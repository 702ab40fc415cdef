return { defaults = 5 }
