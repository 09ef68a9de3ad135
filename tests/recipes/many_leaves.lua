-- many_leaves.lua — a chain of n rms_norms, each with its own weight: n leaves and 2n + 2 nodes, for
-- tests/cli/scaling.sh (compile time must grow about linearly in n). dup = true declares the first
-- weight's name again at the end (the duplicate check at scale); outputs > 0 marks that many of the
-- chain's values as graph outputs, spread evenly (g:output's name check at scale).
recipe {
  name = "many_leaves",
  configs = { base = { n = 1000, dup = false, outputs = 0 } },
  limits = { n = { min = 1, max = 1000000 }, outputs = { min = 0, max = 1000000 } },
  build = function(g, cfg)
    local x = g:input("x", "bf16", {"T", 64})
    local every = cfg.outputs > 0 and cfg.n // cfg.outputs or 0
    for i = 1, cfg.n do
      x = g:rms_norm(x, g:weight("w" .. i, "bf16", {64}), {eps = 1e-5})
      if every > 0 and i % every == 0 then g:output("y" .. i, x) end
    end
    if cfg.dup then g:weight("w1", "bf16", {64}) end
    g:output("y", x)
  end,
}
