local t = setmetatable({}, {__gc = function() error("gc") end}) return {}
