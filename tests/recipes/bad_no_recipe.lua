-- expect: -: never calls recipe{...}
-- A file that defines things but never declares its recipe.
local configs = { tiny = { hidden = 64 } }
local function build(g, cfg) end
