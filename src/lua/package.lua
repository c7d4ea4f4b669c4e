-- require from the filesystem (package.path), as LuaJIT's searchers do; built-in modules win
-- because package.preload is searched first. C modules (package.cpath) are refused.
-- Run once per VM (src/lua/vm.ts) with the host's file helpers as its argument.
local host = ...
local load, error, format = load, error, string.format

local function lua_searcher(name)
  local code, file = host.find_module(name, package.path)
  if not code then return file end
  local fn, err = load(code, '@' .. file)
  if not fn then
    error(format("error loading module '%s' from file '%s':\n\t%s", name, file, err), 0)
  end
  return fn, file
end

local function c_searcher(name)
  local file, message = host.find_c_module(name, package.cpath)
  if not file then return message end
  error(format("error loading module '%s' from file '%s':\n\tC modules are not supported " ..
    "(the Lua VM is Lua 5.4 in WebAssembly)", name, file), 0)
end

package.searchers = { package.searchers[1], lua_searcher, c_searcher }
package.loaders = package.searchers
package.loadlib = function() return nil, 'C modules are not supported (the Lua VM is Lua 5.4 in WebAssembly)', 'absent' end

function loadfile(filename, mode, env)
  local code, err = host.read_file(filename)
  if not code then return nil, err end
  return load(code, '@' .. filename, mode, env or _G)
end

function dofile(filename)
  local fn, err = loadfile(filename)
  if not fn then error(err, 2) end
  return fn()
end
