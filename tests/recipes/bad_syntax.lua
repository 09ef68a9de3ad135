-- expect: 7: '}' expected
-- A Lua syntax error: a missing comma between table fields.
recipe {
  name = "bad_syntax",
  configs = { tiny = { hidden = 64 } },
  build = function(g, cfg) end
  default = "tiny",
}
