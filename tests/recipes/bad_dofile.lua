-- expect: 3: unknown global 'dofile'
-- Running another file: dofile is removed.
dofile("/etc/passwd")
recipe { name = "bad_dofile", configs = { tiny = {} }, build = function(g, cfg) end }
