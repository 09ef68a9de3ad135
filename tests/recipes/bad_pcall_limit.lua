-- expect: 8: instruction limit of 50000000 exceeded
-- A recipe that tries to swallow the instruction limit with pcall.
recipe {
  name = "bad_pcall_limit",
  configs = { tiny = {} },
  build = function(g, cfg)
    while true do
      pcall(function() while true do end end)
    end
  end,
}
