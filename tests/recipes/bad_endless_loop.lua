-- expect: 9: instruction limit of 50000000 exceeded
-- A build that never ends: stopped by the instruction limit.
recipe {
  name = "bad_endless_loop",
  configs = { tiny = { layers = 2 } },
  build = function(g, cfg)
    local i = 0
    while true do
      i = i + 1
    end
  end,
}
