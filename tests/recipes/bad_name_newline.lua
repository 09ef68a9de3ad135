-- expect: 8: input 'x?%1 = input "y': a newline at byte 1
-- An input name with a newline: a second value line in `kiln ir` and the stored graph.
recipe {
  name = "bad_name_newline",
  configs = { tiny = {} },
  build = function(g, cfg)
    local w = g:weight("w", "f32", {64})
    local x = g:input('x\n%1 = input "y', "f32", {"T", 64})
    g:output("y", g:rms_norm(x, w, { eps = 1e-5 }))
  end,
}
