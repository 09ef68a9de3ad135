-- expect: 3: unknown global 'loadfile'
-- Loading another file: loadfile is removed.
local chunk = loadfile("/etc/passwd")
recipe { name = "bad_loadfile", configs = { tiny = {} }, build = function(g, cfg) end }
