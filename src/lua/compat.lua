-- LuaJIT / Lua 5.1 compatibility for OpenResty code on Lua 5.4, and the sandbox.
-- Run once per VM (src/lua/vm.ts) with the host's helpers as its argument.
-- What Lua 5.4 still shows through is listed in docs/lua.md.
local host = ...

local type, select, rawget, rawset, pairs, next, error = type, select, rawget, rawset, pairs, next, error
local getmetatable, setmetatable, tonumber, load = getmetatable, setmetatable, tonumber, load
local mtype, floor, tointeger = math.type, math.floor, math.tointeger
local native_tostring, native_format = tostring, string.format
local getinfo, getupvalue, upvaluejoin = debug.getinfo, debug.getupvalue, debug.upvaluejoin
local pack, concat = table.pack, table.concat

-- ---- sandbox: nothing that ends or forks the process, nothing that blocks on stdin ----
os.exit, os.execute, io.popen = nil, nil, nil
io.read = function() return nil end -- nginx's stdin is /dev/null: end of file at once

-- ---- numbers print as LuaJIT prints them (%.14g: no ".0" on integral floats; NaN is "nan") ----
local function tostring(v)
  if mtype(v) == 'float' then
    if v ~= v then return 'nan' end
    return native_format('%.14g', v)
  end
  return native_tostring(v)
end
_G.tostring = tostring

-- string.format: a float where LuaJIT formats an integer or a string
local int_conversions = { d = true, i = true, c = true, x = true, X = true, o = true, u = true }
local function compat_format(fmt, ...)
  local args = pack(...)
  local i, pos = 0, 1
  while true do
    local at = fmt:find('%', pos, true)
    if not at then break end
    if fmt:sub(at + 1, at + 1) == '%' then
      pos = at + 2
    else
      local _, stop, conv = fmt:find('^[-+ #0]*%d*%.?%d*(%a)', at + 1)
      if not stop then break end
      i = i + 1
      local v = args[i]
      if mtype(v) == 'float' then
        if conv == 's' then
          args[i] = tostring(v)
        elseif int_conversions[conv] and v == v and v ~= 1/0 and v ~= -1/0 then
          args[i] = tointeger(v >= 0 and floor(v) or -floor(-v)) or v
        end
      end
      pos = stop + 1
    end
  end
  return native_format(fmt, table.unpack(args, 1, args.n))
end
string.format = function(fmt, ...)
  for i = 1, select('#', ...) do
    if mtype((select(i, ...))) == 'float' then return compat_format(fmt, ...) end
  end
  return native_format(fmt, ...)
end

print = function(...)
  local n = select('#', ...)
  local parts = { ... }
  for i = 1, n do parts[i] = tostring(parts[i]) end
  host.print(concat(parts, '\t', 1, n))
end

-- ---- user coroutines: a host wait (ngx.sleep, a cosocket read) inside one waits in its parents ----
-- A host function that suspends yields its own coroutine; coroutine.resume sees that, makes the
-- resuming coroutine wait too (up to the hook's entry coroutine, which the host resumes when the
-- wait is over), then resumes the child, which gets the result. coroutine.yield is unchanged.
local native_resume, native_create, unpack_ = coroutine.resume, coroutine.create, table.unpack
local child_suspended, relay = host.child_suspended, host.relay
local function resume(co, ...)
  local r = pack(native_resume(co, ...))
  while child_suspended() do
    relay()
    r = pack(native_resume(co))
  end
  return unpack_(r, 1, r.n)
end
coroutine.resume = resume
coroutine.wrap = function(f)
  local co = native_create(f)
  return function(...)
    local r = pack(resume(co, ...))
    if not r[1] then error(r[2], 0) end -- as LuaJIT: the error as is, no position added
    return unpack_(r, 2, r.n)
  end
end

-- ---- Lua 5.1 globals ----
_G._VERSION = 'Lua 5.1'
unpack = table.unpack
loadstring = function(s, chunkname) return load(s, chunkname) end

-- setfenv/getfenv through the function's _ENV upvalue. A function that uses no global has no
-- _ENV, so setfenv has nothing to change there (nor would it matter); threads (level 0) are refused.
local function env_index(f)
  local i = 1
  while true do
    local name = getupvalue(f, i)
    if name == '_ENV' then return i end
    if name == nil then return nil end
    i = i + 1
  end
end
local function fn_at(f, level_offset)
  if type(f) == 'number' then
    if f == 0 then return nil end
    local info = getinfo(f + level_offset, 'f')
    if not info then error('bad argument #1 (invalid level)', 3) end
    return info.func
  end
  return f
end
function setfenv(f, t)
  local fn = fn_at(f, 2)
  if fn == nil then error("setfenv: changing a thread's environment is not supported in Lua 5.4", 2) end
  local i = env_index(fn)
  if i then upvaluejoin(fn, i, function() return t end, 1) end
  return fn
end
function getfenv(f)
  local fn = fn_at(f or 1, 2)
  if fn == nil then return _G end
  local i = env_index(fn)
  if not i then return _G end
  local _, env = getupvalue(fn, i)
  return env
end

function module(name, ...)
  local M = package.loaded[name]
  if type(M) ~= 'table' then
    M = _G
    for part in name:gmatch('[^.]+') do
      local t = rawget(M, part)
      if t == nil then t = {}; rawset(M, part, t) end
      if type(t) ~= 'table' then error("name conflict for module '" .. name .. "'", 2) end
      M = t
    end
    package.loaded[name] = M
  end
  if M._NAME == nil then
    M._M, M._NAME, M._PACKAGE = M, name, name:match('^(.*%.)[^.]*$') or ''
  end
  setfenv(2, M)
  for i = 1, select('#', ...) do (select(i, ...))(M) end
end
function package.seeall(M)
  local mt = getmetatable(M)
  if not mt then mt = {}; setmetatable(M, mt) end
  mt.__index = _G
end

-- ---- math, table: what LuaJIT has ----
math.pow = function(x, y) return x ^ y end
math.log10 = function(x) return math.log(x, 10) end
math.atan2 = function(y, x) return math.atan(y, x) end
math.ldexp = function(m, e) return m * 2.0 ^ e end
math.frexp = function(x)
  if x == 0 or x ~= x or x == 1/0 or x == -1/0 then return x, 0 end
  local e = floor(math.log(math.abs(x), 2)) + 1
  local m = x / 2.0 ^ e
  if math.abs(m) >= 1 then m, e = m / 2, e + 1 elseif math.abs(m) < 0.5 then m, e = m * 2, e - 1 end
  return m, e
end
math.cosh = function(x) return (math.exp(x) + math.exp(-x)) / 2 end
math.sinh = function(x) return (math.exp(x) - math.exp(-x)) / 2 end
math.tanh = function(x) local a, b = math.exp(x), math.exp(-x); return (a - b) / (a + b) end

table.new = host.table_new
table.clear = function(t) for k in next, t do t[k] = nil end end
table.nkeys = function(t) local n = 0; for _ in next, t do n = n + 1 end; return n end
table.getn = function(t) return #t end
table.maxn = function(t)
  local max = 0
  for k in pairs(t) do if type(k) == 'number' and k > max then max = k end end
  return max
end
table.foreach = function(t, f) for k, v in pairs(t) do local r = f(k, v); if r ~= nil then return r end end end
table.foreachi = function(t, f) for i = 1, #t do local r = f(i, t[i]); if r ~= nil then return r end end end

-- ---- bit: LuaJIT's BitOp on signed 32-bit results ----
local function tobit(x)
  if mtype(x) ~= 'integer' then
    x = tonumber(x) % 4294967296.0
    if x ~= x then return 0 end
    local f = floor(x)
    local d = x - f
    if d > 0.5 or (d == 0.5 and f % 2 == 1) then f = f + 1 end
    x = tointeger(f) or 0
  end
  x = x & 0xffffffff
  if x >= 0x80000000 then return x - 0x100000000 end
  return x
end
local function fold(op)
  return function(a, b, ...)
    local r = op(tobit(a), tobit(b or 0))
    for i = 1, select('#', ...) do r = op(r, tobit((select(i, ...)))) end
    return tobit(r)
  end
end
local bit = {
  tobit = tobit,
  band = fold(function(a, b) return a & b end),
  bor = fold(function(a, b) return a | b end),
  bxor = fold(function(a, b) return a ~ b end),
  bnot = function(x) return tobit(~tobit(x)) end,
  lshift = function(x, n) return tobit(tobit(x) << (tobit(n) & 31)) end,
  rshift = function(x, n) return tobit((tobit(x) & 0xffffffff) >> (tobit(n) & 31)) end,
  -- the sign-extended 64-bit value shifted logically has the arithmetic result in its low 32 bits
  arshift = function(x, n) return tobit(tobit(x) >> (tobit(n) & 31)) end,
  rol = function(x, n)
    local u, s = tobit(x) & 0xffffffff, tobit(n) & 31
    return tobit((u << s) | (u >> (32 - s)))
  end,
  ror = function(x, n)
    local u, s = tobit(x) & 0xffffffff, tobit(n) & 31
    return tobit((u >> s) | (u << (32 - s)))
  end,
  bswap = function(x)
    local u = tobit(x) & 0xffffffff
    return tobit(((u & 0xff) << 24) | ((u & 0xff00) << 8) | ((u >> 8) & 0xff00) | (u >> 24))
  end,
  tohex = function(x, n)
    n = n == nil and 8 or tobit(n)
    local upper = n < 0
    if upper then n = -n end
    if n > 8 then n = 8 end
    local s = native_format(upper and '%08X' or '%08x', tobit(x) & 0xffffffff)
    return s:sub(9 - n)
  end,
}
_G.bit = bit

-- ---- modules LuaJIT/OpenResty code requires ----
local preload = package.preload
preload['bit'] = function() return bit end
preload['table.new'] = function() return table.new end
preload['table.clear'] = function() return table.clear end
preload['table.nkeys'] = function() return table.nkeys end
local function unavailable(name, why)
  preload[name] = function() error("module '" .. name .. "' is not available in Gatehouse: " .. why, 2) end
end
unavailable('ffi', 'the Lua VM is Lua 5.4 in WebAssembly, which has no FFI')
unavailable('jit', 'the Lua VM is Lua 5.4 in WebAssembly, not LuaJIT')
unavailable('jit.util', 'the Lua VM is Lua 5.4 in WebAssembly, not LuaJIT')
