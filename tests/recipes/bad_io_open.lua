-- expect: 3: unknown global 'io'
-- Reading a file: io is not in the sandbox.
local f = io.open("/etc/passwd", "r")
recipe { name = "bad_io_open", configs = { tiny = {} }, build = function(g, cfg) end }
