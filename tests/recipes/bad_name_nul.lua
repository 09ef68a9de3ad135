-- expect: 7: weight 'model.norm.weight?evil': a NUL byte at byte 17
-- A NUL inside a Lua string would silently cut the name to "model.norm.weight".
recipe {
  name = "bad_name_nul",
  configs = { tiny = {} },
  build = function(g, cfg)
    local w = g:weight("model.norm.weight\0evil", "f32", {64})
    local x = g:input("x", "f32", {"T", 64})
    g:output("y", g:rms_norm(x, w, { eps = 1e-5 }))
  end,
}
