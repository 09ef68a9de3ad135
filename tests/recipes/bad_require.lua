-- expect: 3: unknown global 'require'
-- Loading a module: there is no require (and no package library).
local helpers = require("helpers")
recipe { name = "bad_require", configs = { tiny = {} }, build = function(g, cfg) end }
