-- expect: 4: __gc metamethods are not allowed
-- A finalizer runs with hooks off, so a looping one could never be stopped: refused.
local trap = {}
setmetatable(trap, { __gc = function() while true do end end })
recipe { name = "bad_gc_finalizer", configs = { tiny = {} }, build = function(g, cfg) end }
