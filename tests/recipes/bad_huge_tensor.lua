-- expect: 7: weight 'w': f32[2147483647,2147483647] is larger than 2^48 bytes
-- Each dimension fits in 32 bits, but the tensor would be 2^64 bytes.
recipe {
  name = "bad_huge_tensor",
  configs = { tiny = {} },
  build = function(g, cfg)
    local w = g:weight("w", "f32", {2147483647, 2147483647})
    local x = g:input("x", "f32", {"T", 2147483647})
    g:output("y", g:matmul(x, w))
  end,
}
