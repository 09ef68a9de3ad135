-- expect: 3: attempt to call a nil value (field 'dump')
-- Making bytecode: string.dump is removed.
local bytecode = string.dump(function() return 1 end)
recipe { name = "bad_string_dump", configs = { tiny = {} }, build = function(g, cfg) end }
