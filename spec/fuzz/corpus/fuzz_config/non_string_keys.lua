return { [1] = "x", [true] = 2 }
