-- expect: 9: output 'y z': ' ' at byte 1
-- Output names follow the name rule too (the package's buffer table and plan hold them).
recipe {
  name = "bad_output_name",
  configs = { tiny = {} },
  build = function(g, cfg)
    local w = g:weight("w", "f32", {64})
    local x = g:input("x", "f32", {"T", 64})
    g:output("y z", g:rms_norm(x, w, { eps = 1e-5 }))
  end,
}
