-- expect: 4: unknown global 'load'
-- Loading bytecode: string.dump is gone and so is load.
local bytecode = "\27Lua\84\0\25\147\13\10\26\10\4\8\8"
local f = load(bytecode, "=evil", "b")
recipe { name = "bad_load_bytecode", configs = { tiny = {} }, build = function(g, cfg) end }
