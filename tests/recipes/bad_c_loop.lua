-- expect: 7: exceeded by table.move
-- table.move of nils loops in C without allocating: charged one instruction per element.
recipe {
  name = "bad_c_loop",
  configs = { tiny = {} },
  build = function(g, cfg)
    table.move({}, 1, 1 << 50, 1, {})
  end,
}
