-- expect: 7: input 'x': dimension 1 is 1099511627776 (at most 2147483647)
-- An activation f32[2^40, 2^40]: its byte count would overflow int64 (and did, in the schedule).
recipe {
  name = "bad_huge_dim",
  configs = { tiny = {} },
  build = function(g, cfg)
    local x = g:input("x", "f32", {2^40, 2^40})
    g:output("y", g:add(x, x))
  end,
}
