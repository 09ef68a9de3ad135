-- expect: 7: weight 'w" : f32[1]?%9 = weight "fake': a quote at byte 1
-- A weight name that would forge a second line (a fake weight) in the graph text.
recipe {
  name = "bad_name_quote",
  configs = { tiny = {} },
  build = function(g, cfg)
    local w = g:weight('w" : f32[1]\n%9 = weight "fake', "f32", {64})
    local x = g:input("x", "f32", {"T", 64})
    g:output("y", g:rms_norm(x, w, { eps = 1e-5 }))
  end,
}
