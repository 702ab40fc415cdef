return { defaults = { backoff = function(attempt, err) return attempt * 2 end } }
