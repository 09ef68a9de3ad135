-- expect: 5: memory limit of 64 MiB exceeded
-- A table of ever more strings at load time: stopped by the memory cap.
local hoard = {}
while true do
  hoard[#hoard + 1] = string.rep("x", 4096) .. #hoard
end
