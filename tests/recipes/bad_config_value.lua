-- expect: 3: config key 'bad key': ' ' at byte 3
-- Config entries print as key=value on the graph's config line: a key with a space forges a field.
recipe {
  name = "bad_config_value",
  configs = { tiny = { ["bad key"] = 1 } },
  build = function(g, cfg)
    local w = g:weight("w", "f32", {64})
    local x = g:input("x", "f32", {"T", 64})
    g:output("y", g:rms_norm(x, w, { eps = 1e-5 }))
  end,
}
