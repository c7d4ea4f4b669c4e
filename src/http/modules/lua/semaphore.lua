-- ngx.semaphore, lua-resty-core's module: the Lua half (the checks lua-resty-core makes in Lua,
-- with its messages); semaphore.ts keeps each semaphore's count and its queue of waiting threads.
local host = ...
local new, post, count, wait, gc, known = host.new, host.post, host.count, host.wait, host.gc, host.known
local type, tonumber, error, rawget, setmetatable = type, tonumber, error, rawget, setmetatable

local _M = { version = '0.1.25' }
-- collected with threads still waiting: OpenResty logs it (the waiters never wake)
local mt = { __index = _M, __gc = function(self) gc(rawget(self, 'sem')) end }

local function id_of(self)
  local id = type(self) == 'table' and rawget(self, 'sem')
  if not known(id) then error('not a semaphore instance', 3) end
  return id
end

function _M.new(n)
  n = tonumber(n) or 0
  if n < 0 then error('no negative number', 2) end
  return setmetatable({ sem = new(n) }, mt)
end

function _M.wait(self, seconds)
  local id = id_of(self)
  local ms = tonumber(seconds) * 1000
  if ms < 0 then error('no negative number', 2) end
  return wait(id, ms)
end

function _M.post(self, n)
  local id = id_of(self)
  local num = n and tonumber(n) or 1
  if num < 1 then error('positive number required', 2) end
  post(id, num)
  return true
end

function _M.count(self)
  return count(id_of(self))
end

return _M
