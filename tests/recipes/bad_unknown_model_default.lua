-- expect: 3: default 'llama-3-8b' is not one of the configs
-- The default names a config that does not exist.
recipe {
  name = "bad_unknown_model_default",
  default = "llama-3-8b",
  configs = { ["smollm2-135m"] = { hidden = 576 } },
  build = function(g, cfg) end,
}
