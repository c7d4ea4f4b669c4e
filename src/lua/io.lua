-- io.open / io.lines on the real filesystem (host side: src/lua/io.ts), replacing wasmoon's io,
-- which sees only emscripten's in-memory filesystem. io.write/io.stdout/io.stderr stay as they are.
-- Run once per VM (src/lua/vm.ts) with the host's file helpers as its argument.
local host = ...
local open_, read_, write_, seek_, close_ = host.open, host.read, host.write, host.seek, host.close
local type, select, error, tostring, rawget, setmetatable, getmetatable = type, select, error, tostring, rawget, setmetatable, getmetatable
local unpack, format = table.unpack, string.format

local File = { __name = 'FILE*' }
File.__index = File

local function handle(f)
  local id = type(f) == 'table' and rawget(f, 'id')
  if not id then error('attempt to use a closed file', 3) end
  return id
end

-- "*a", "a", "*l", "l", "*L", "L", "*n", "n", or a byte count
local function format_of(what)
  if type(what) == 'number' then return tostring(what // 1) end
  local f = tostring(what):gsub('^%*', ''):sub(1, 1)
  if f == 'a' or f == 'l' or f == 'L' or f == 'n' then return f end
  error("bad argument #1 to 'read' (invalid format)", 3)
end

function File:read(...)
  local id = handle(self)
  local n = select('#', ...)
  if n == 0 then return read_(id, 'l') end
  local out = {}
  for i = 1, n do
    local f = format_of((select(i, ...)))
    local v
    if f == 'n' then
      local line = read_(id, 'l') -- a number on the rest of the line
      v = line and tonumber(line)
    else
      v = read_(id, f)
    end
    out[i] = v
    if v == nil then return unpack(out, 1, i) end
  end
  return unpack(out, 1, n)
end

function File:lines(...)
  local formats = table.pack(...)
  return function()
    if not rawget(self, 'id') then return nil end
    if formats.n == 0 then return read_(self.id, 'l') end
    return self:read(unpack(formats, 1, formats.n))
  end
end

function File:write(...)
  local id = handle(self)
  for i = 1, select('#', ...) do
    local v = select(i, ...)
    if type(v) == 'number' then v = tostring(v)
    elseif type(v) ~= 'string' then error(format("bad argument #%d to 'write' (string expected, got %s)", i, type(v)), 2) end
    local ok, err, code = write_(id, v)
    if not ok then return nil, err, code end
  end
  return self
end

function File:seek(whence, offset) return seek_(handle(self), whence or 'cur', offset or 0) end
function File:close() local id = handle(self) self.id = nil return close_(id) end
function File:flush() handle(self) return self end
function File:setvbuf() return true end
File.__gc = function(self) local id = rawget(self, 'id') if id then close_(id) end end
File.__tostring = function(self) return rawget(self, 'id') and format('file (%p)', self) or 'file (closed)' end

local native_type = io.type
function io.open(path, mode)
  local id, err, code = open_(path, mode or 'r')
  if not id then return nil, err, code end
  return setmetatable({ id = id }, File)
end

function io.lines(path, ...)
  if path == nil then return function() return nil end end -- stdin is at its end
  local f, err = io.open(path)
  if not f then error(err, 2) end
  local next_line = f:lines(...)
  return function()
    local v = next_line()
    if v == nil and rawget(f, 'id') then f:close() end
    return v
  end
end

function io.type(f)
  if getmetatable(f) == File then return rawget(f, 'id') and 'file' or 'closed file' end
  return native_type(f)
end
