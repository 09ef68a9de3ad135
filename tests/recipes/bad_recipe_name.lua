-- expect: 3: recipe: name 'llama model=x?dims T': ' ' at byte 5
-- The recipe's name prints unquoted on the graph's first line.
recipe {
  name = "llama model=x\ndims T",
  configs = { tiny = {} },
  build = function(g, cfg)
    local w = g:weight("w", "f32", {64})
    local x = g:input("x", "f32", {"T", 64})
    g:output("y", g:rms_norm(x, w, { eps = 1e-5 }))
  end,
}
