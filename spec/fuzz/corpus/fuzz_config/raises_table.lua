error(setmetatable({}, { __tostring = function() return "obj" end }))
