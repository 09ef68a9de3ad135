-- expect: 8: exceeded by a string pattern
-- Lua patterns backtrack in C, out of the count hook's sight: the worst case is charged up front.
recipe {
  name = "bad_pattern_backtrack",
  configs = { tiny = {} },
  build = function(g, cfg)
    local s = string.rep("a", 5000)
    local hit = s:find(".-.-.-.-.-.-.-.-b")
  end,
}
