return { hooks = 7 }
