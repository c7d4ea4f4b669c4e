-- ngx.socket: the Lua half of the cosocket objects (api-socket-tcp.ts and api-socket-udp.ts are the
-- host half). An object is a table whose [1] is the host's id for it, as OpenResty keeps its
-- userdata at [1]; the methods are host functions that take the object first.
local host = ...
local tcp, udp = host.tcp, host.udp
local setmetatable = setmetatable

local tcp_methods = {}
for _, name in ipairs({ 'bind', 'connect', 'sslhandshake', 'send', 'receive', 'receiveany', 'close', 'settimeout',
  'settimeouts', 'setoption', 'setkeepalive', 'getreusedtimes' }) do
  tcp_methods[name] = tcp[name]
end
function tcp_methods.receiveuntil(self, pattern, opts)
  local id = tcp.until_new(self, pattern, opts)
  local read = tcp.until_read
  return function(size) return read(self, id, size) end
end
local tcp_mt = { __index = tcp_methods }

-- ngx.req.socket's objects: the plain one only reads (the request body), the raw one sends too
local req_methods, raw_methods = {}, {}
for _, name in ipairs({ 'receive', 'receiveany', 'receiveuntil', 'settimeout', 'settimeouts' }) do
  req_methods[name] = tcp_methods[name]
  raw_methods[name] = tcp_methods[name]
end
raw_methods.send = tcp_methods.send
local req_gc = tcp.req_gc
local req_mt = { __index = req_methods, __gc = req_gc }
local raw_mt = { __index = raw_methods, __gc = req_gc }
local req_new = tcp.req_new
local function req_socket(...)
  local id, raw = req_new(...)
  if not id then return nil, raw end
  return setmetatable({ id }, raw and raw_mt or req_mt)
end

local udp_methods = {}
for _, name in ipairs({ 'setpeername', 'send', 'receive', 'close', 'settimeout' }) do
  udp_methods[name] = udp[name]
end
local udp_mt = { __index = udp_methods }

local socket = {}
function socket.tcp()
  return setmetatable({ tcp.new() }, tcp_mt)
end
socket.stream = socket.tcp
function socket.udp()
  return setmetatable({ udp.new() }, udp_mt)
end
function socket.connect(...)
  local sock = socket.tcp()
  local ok, err = sock:connect(...)
  if not ok then return nil, err end
  return sock
end
return socket, req_socket
