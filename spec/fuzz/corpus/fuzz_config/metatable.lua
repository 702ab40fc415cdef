return setmetatable({}, { __index = function() error("meta") end, __pairs = function() error("pairs") end })
