-- expect: 7: unknown global 'hiden'
-- A typo reads an undefined global: strict globals catch it instead of passing nil along.
recipe {
  name = "bad_typo_global",
  configs = { tiny = { hidden = 64 } },
  build = function(g, cfg)
    local x = g:input("x", "bf16", {"T", hiden})
  end,
}
