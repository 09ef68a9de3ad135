-- expect: 6: unknown global 'os'
-- Running a command: os is not in the sandbox.
recipe {
  name = "bad_os_execute",
  configs = { tiny = {} },
  build = function(g, cfg) os.execute("touch /tmp/kiln_pwned") end,
}
