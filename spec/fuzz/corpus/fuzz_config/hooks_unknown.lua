return { hooks = { on_tick = function(t) return 3 end, nope = 1 } }
