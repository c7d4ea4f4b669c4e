-- The `ngx` table as OpenResty code sees it, built once per worker VM over the host's functions
-- (api.ts and the files it gathers). What is a plain function here is a host function; what needs
-- Lua semantics (metatables, varargs, ngx.exit unwinding the hook) is written here.
local host = ...
local type, select, error, pcall, xpcall = type, select, error, pcall, xpcall
local setmetatable, rawget, getinfo, concat = setmetatable, rawget, debug.getinfo, table.concat
local format, floor, next = string.format, math.floor, next
local gsub, lower, pack = string.gsub, string.lower, table.pack

local ngx = {}
_G.ngx = ngx
for k, v in pairs(host.constants) do ngx[k] = v end
ngx.null = host.null()
-- LuaJIT writes a NULL light userdata as "userdata: NULL" (Lua 5.4: "userdata: 0")
do
  local native, null = tostring, ngx.null
  tostring = function(v)
    if v == null then return 'userdata: NULL' end
    return native(v)
  end
  _G.tostring = tostring
end

-- ---- ngx.exit and its kin end the hook: an error no pcall keeps (OpenResty yields for good) ----
local EXIT = setmetatable({}, { __tostring = function() return 'ngx.exit' end })
local function rethrow(ok, ...)
  if not ok and (...) == EXIT then error(EXIT, 0) end
  return ok, ...
end
_G.pcall = function(f, ...) return rethrow(pcall(f, ...)) end
_G.xpcall = function(f, handler, ...)
  return rethrow(xpcall(f, function(e) if e == EXIT then return e end return handler(e) end, ...))
end

function ngx.exit(status)
  host.exit(status)
  error(EXIT, 0)
end
function ngx.exec(uri, args)
  host.exec(uri, args)
  error(EXIT, 0)
end
function ngx.redirect(...)
  local n = select('#', ...)
  if n ~= 1 and n ~= 2 then error('expecting one or two arguments', 2) end
  local uri, status = ...
  local t = type(uri)
  if t ~= 'string' and t ~= 'number' then
    error(format("bad argument #1 to 'redirect' (string expected, got %s)", t), 2)
  end
  host.redirect(uri, status)
  error(EXIT, 0)
end

-- ---- logging: "[lua] content_by_lua(nginx.conf:40):3: msg" with the caller's place ----
local function text_of(v, i, fname)
  local t = type(v)
  if t == 'string' or t == 'number' then return tostring(v) end
  if v == nil then return 'nil' end
  if t == 'boolean' then return v and 'true' or 'false' end
  if v == ngx.null then return 'null' end
  local mt = getmetatable(v)
  if mt and mt.__tostring then return tostring(v) end
  error('bad argument #' .. i .. " to '" .. fname .. "' (expected table to have __tostring metamethod)", 4)
end
-- (the message's pieces count from #1 for ngx.log too: OpenResty drops the level first)
local function log_at(level, fname, ...)
  local n = select('#', ...)
  local parts = {}
  for i = 1, n do parts[i] = text_of((select(i, ...)), i, fname) end
  local info = getinfo(3, 'Sln')
  -- the file's base name, as OpenResty's log wrapper cuts short_src
  local where = info and (gsub(info.short_src, '^.*/', '') .. ':' .. (info.currentline or 0) .. ': ') or ''
  -- OpenResty names the calling Lua function when it has a name: "foo(): msg"
  -- (LuaJIT names a metamethod with its underscores: "__index(): ")
  if info and info.what == 'Lua' and info.namewhat ~= '' and info.name then
    where = where .. (info.namewhat == 'metamethod' and '__' or '') .. info.name .. '(): '
  end
  host.log(level, where .. concat(parts, '', 1, n))
end
function ngx.log(level, ...)
  if type(level) ~= 'number' then error("bad argument #1 to 'log' (number expected, got " .. type(level) .. ')', 2) end
  log_at(level, 'log', ...)
end
_G.print = function(...) log_at(ngx.NOTICE, 'print', ...) end

-- ---- output ----
local write = host.write
-- ngx_http_lua_output.c's rules: a table must be an array (positive integer keys only; its holes
-- print as nil), its elements strings, numbers, nil, booleans, ngx.null or such arrays
-- (`strict`, as ngx.arg[1] takes them: strings, numbers and such arrays only)
local function bad_arg(name, i, msg, depth)
  error(format("bad argument #%d to '%s' (%s)", i, name, msg), depth + 1)
end
local function flatten_table(v, out, name, i, depth, strict)
  local max = 0
  for k in next, v do
    if type(k) ~= 'number' or k < 1 or k ~= floor(k) then bad_arg(name, i, 'non-array table found', depth + 1) end
    if k > max then max = k end
  end
  for j = 1, max do
    local e = v[j]
    local t = type(e)
    if t == 'string' or t == 'number' then out[#out + 1] = tostring(e)
    elseif t == 'table' then flatten_table(e, out, name, i, depth + 1, strict)
    elseif strict then bad_arg(name, i, 'bad data type ' .. (e == ngx.null and 'userdata' or t) .. ' found', depth + 1)
    elseif e == nil then out[#out + 1] = 'nil'
    elseif t == 'boolean' then out[#out + 1] = e and 'true' or 'false'
    elseif e == ngx.null then out[#out + 1] = 'null'
    else bad_arg(name, i, 'bad data type ' .. t .. ' found', depth + 1) end
  end
end
local function output(name, newline, ...)
  local out = {}
  for i = 1, select('#', ...) do
    local v = (select(i, ...))
    local t = type(v)
    if t == 'string' or t == 'number' then out[#out + 1] = tostring(v)
    elseif v == nil then out[#out + 1] = 'nil'
    elseif t == 'boolean' then out[#out + 1] = v and 'true' or 'false'
    elseif t == 'table' then flatten_table(v, out, name, i, 2)
    elseif v == ngx.null then out[#out + 1] = 'null'
    else bad_arg(name, i, 'string, number, boolean, nil, ngx.null, or array table expected, but got ' .. t, 2) end
  end
  if newline then out[#out + 1] = '\n' end
  return write(concat(out))
end
-- one string, the common call, goes straight to the host (no table, no concatenated copy; the
-- host adds say's newline)
function ngx.print(...)
  if type((...)) == 'string' and select('#', ...) == 1 then return write(...) end
  return output('print', false, ...)
end
function ngx.say(...)
  if type((...)) == 'string' and select('#', ...) == 1 then return write(..., true) end
  return output('say', true, ...)
end

-- ---- ngx.var, ngx.header, ngx.arg, ngx.ctx, ngx.status ----
local var_get, var_set = host.var_get, host.var_set
ngx.var = setmetatable({}, {
  __index = function(_, k) return var_get(k) end,
  __newindex = function(_, k, v) var_set(k, v) end,
})
local header_get, header_set = host.header_get, host.header_set
ngx.header = setmetatable({}, {
  __index = function(_, k) return header_get(k) end,
  __newindex = function(_, k, v) header_set(k, v) end,
})
local arg_get, arg_set = host.arg_get, host.arg_set
ngx.arg = setmetatable({}, {
  __index = function(_, i) return arg_get(i) end,
  __newindex = function(_, i, v)
    -- a chunk given as a (nested) array of strings and numbers is joined, as ngx.print joins it
    if i == 1 and type(v) == 'table' then
      local out = {}
      flatten_table(v, out, '?', 3, 1, true)
      v = concat(out)
    end
    arg_set(i, v)
  end,
  __len = function() return host.arg_count() end,
})

local ctxs = {}
local ctx_id = host.ctx_id
local status_get, status_set = host.status_get, host.status_set
local headers_sent, is_subrequest
setmetatable(ngx, {
  __index = function(_, k)
    if k == 'ctx' then
      local id = ctx_id()
      local c = ctxs[id]
      if not c then c = {}; ctxs[id] = c end
      return c
    elseif k == 'status' then
      return status_get()
    elseif k == 'headers_sent' then
      return headers_sent()
    elseif k == 'is_subrequest' then
      return is_subrequest()
    end
  end,
  __newindex = function(t, k, v)
    if k == 'ctx' then ctxs[ctx_id()] = v
    elseif k == 'status' then status_set(v)
    else rawset(t, k, v) end
  end,
})

-- ---- headers tables: any case and `_` for `-` find the header (OpenResty's metatable) ----
-- names looked up are remembered (a few hundred at most): a miss, `h["user-agent"]` without the
-- header, would otherwise cost a lower and a gsub each time
local normalized, normalized_count = {}, 0
local function normalize(k)
  if type(k) ~= 'string' then return k end
  local n = normalized[k]
  if n == nil then
    n = (gsub(lower(k), '_', '-'))
    if normalized_count >= 256 then normalized, normalized_count = {}, 0 end
    normalized[k] = n
    normalized_count = normalized_count + 1
  end
  return n
end
local headers_mt = {
  __index = function(t, k)
    local n = normalize(k)
    if n ~= k then return rawget(t, n) end
  end,
}
ngx.req = {}
-- the *_list functions give the tables below; they are not OpenResty's API
for k, v in pairs(host.req) do
  if not k:find('_list$') then ngx.req[k] = v end
end
-- as OpenResty's: a second result only when there is one ("truncated", an error); not tail
-- calls, so that a host error's level 2 is the caller of get_*
local function one_or_two(t, second)
  if second ~= nil then return t, second end
  return t
end
function ngx.req.get_headers(max, raw)
  local t, truncated = host.req.headers_list(max or 100, raw)
  if not raw then setmetatable(t, headers_mt) end
  return one_or_two(t, truncated)
end
function ngx.req.get_uri_args(max)
  local t, truncated = host.req.uri_args_list(max or 100)
  return one_or_two(t, truncated)
end
function ngx.req.get_post_args(max)
  local t, err = host.req.post_args_list(max or 100)
  return one_or_two(t, err)
end
function ngx.req.set_uri(uri, jump)
  if host.req.set_uri(uri, jump) then error(EXIT, 0) end
end
function ngx.req.read_body()
  local status = host.req.read_body()
  if status then ngx.exit(status) end
end
function ngx.decode_args(s, max)
  local t = host.decode_args_list(s, max or 100)
  return t
end
ngx.resp = {}
function ngx.resp.get_headers(max, raw)
  local t, truncated = host.resp_headers_list(max or 100, raw)
  if not raw then setmetatable(t, headers_mt) end
  return one_or_two(t, truncated)
end

-- ---- what the rest of the host gives as plain functions ----
for _, lib in ipairs({ 'util', 'time' }) do
  for k, v in pairs(host[lib]) do ngx[k] = v end
end
-- ngx.headers_sent is a field read through the metatable, not a function
headers_sent, ngx.headers_sent = ngx.headers_sent, nil
is_subrequest, ngx.is_subrequest = ngx.is_subrequest, nil
ngx.worker = host.worker
ngx.config = host.config
ngx.location = {}
do
  local start, run, wait, unpack = host.location.start, host.location.run, host.location.wait, table.unpack
  -- a boolean option or nil (OpenResty's checks, in its order and words)
  local function flag(opts, name)
    local v = opts[name]
    if v ~= nil and type(v) ~= 'boolean' then error('Bad ' .. name .. ' option value', 0) end
    return v
  end
  -- checks the options, creates the subrequest, gives it the `ctx` option's table as its ngx.ctx, then runs it
  local function begin(uri, opts)
    local args, method, ctx, body, mode, forward
    local pairs_list = {}
    if opts then
      args = opts.args
      local t = type(args)
      if t == 'table' then
        for k in pairs(args) do
          if type(k) ~= 'string' then error('attempt to use a non-string key in the "args" option table', 0) end
        end
        args = ngx.encode_args(args)
      elseif t ~= 'nil' and t ~= 'string' and t ~= 'number' then error('Bad args option value', 0) end
      local vars = opts.vars
      if type(vars) == 'table' then
        for k, v in pairs(vars) do
          if type(k) ~= 'string' then error('attempt to use a non-string key in the "vars" option table', 0) end
          local vt = type(v)
          if vt ~= 'string' and vt ~= 'number' then error('attempt to use bad variable value type ' .. vt, 0) end
          pairs_list[#pairs_list + 1] = k
          pairs_list[#pairs_list + 1] = tostring(v)
        end
      elseif vars ~= nil then
        error('Bad vars option value', 0)
      end
      local share, copy = flag(opts, 'share_all_vars'), flag(opts, 'copy_all_vars')
      mode = (share and 1) or (copy and 2) or 0
      forward = opts.always_forward_body and true or false
      method = opts.method
      if method ~= nil and type(method) ~= 'number' then error('Bad http request method', 0) end
      ctx = opts.ctx
      if ctx ~= nil and type(ctx) ~= 'table' then
        error('Bad ctx option value type ' .. type(ctx) .. ', expected a Lua table', 0)
      end
      body = opts.body
      local bt = type(body)
      if body ~= nil and bt ~= 'string' and bt ~= 'number' then error('Bad http request body', 0) end
    end
    local id, ctx_id = start(uri, args, method, ctx ~= nil, body, mode, forward, unpack(pairs_list))
    if ctx_id then ctxs[ctx_id] = ctx end
    run(id)
    return id
  end
  local function result(list, i)
    return { status = list[i * 4 + 1], body = list[i * 4 + 2], header = list[i * 4 + 3],
      truncated = list[i * 4 + 4] }
  end
  function ngx.location.capture(uri, opts)
    return result(wait(begin(uri, opts)), 0)
  end
  function ngx.location.capture_multi(reqs)
    local ids = {}
    for i, req in ipairs(reqs) do ids[i] = begin(req[1], req[2]) end
    local list = wait(unpack(ids))
    local out = {}
    for i = 1, #ids do out[i] = result(list, i - 1) end
    return unpack(out)
  end
end
ngx.shared = {}
do
  local methods = {}
  for k, f in pairs(host.shdict.ops) do
    methods[k] = function(self, ...)
      if type(self) ~= 'table' or rawget(self, '__name') == nil then
        error('bad "zone" argument', 2)
      end
      return f(rawget(self, '__name'), ...)
    end
  end
  -- as OpenResty's: the methods are the dict's metatable, which is its own __index (dict.__index gives them)
  methods.__index = methods
  for _, name in ipairs(host.shdict.names) do ngx.shared[name] = setmetatable({ __name = name }, methods) end
end
ngx.timer = {}
local timers = {}
do
  local lib, pack = host.timer, table.pack
  local function add(kind, delay, f, ...)
    if type(f) ~= 'function' or getinfo(f, 'S').what == 'C' then
      error("bad argument #2 to '?' (Lua function expected)", 2)
    end
    local id, err = lib[kind](delay)
    if not id then return nil, err end
    timers[id] = pack(f, ...)
    return 1
  end
  function ngx.timer.at(delay, f, ...) return add('at', delay, f, ...) end
  function ngx.timer.every(delay, f, ...) return add('every', delay, f, ...) end
  ngx.timer.running_count = lib.running_count
  ngx.timer.pending_count = lib.pending_count
end
-- ---- light threads (ngx.thread): each runs in a coroutine of its own on the same request ----
ngx.thread = {}
local threads = {}
do
  local lib, pack, unpack = host.thread, table.pack, table.unpack
  local thread_mt = { __tostring = function(t) return 'thread: ' .. t.id end }
  function ngx.thread.spawn(f, ...)
    if type(f) ~= 'function' then error("bad argument #1 to 'spawn' (function expected)", 2) end
    local id = lib.reserve()
    threads[id] = { f = f, args = pack(...) }
    -- the thread ended the request's Lua (ngx.exit …): the spawner ends too
    if lib.start(id) then error(EXIT, 0) end
    return setmetatable({ id = id }, thread_mt)
  end
  function ngx.thread.wait(...)
    local ids = {}
    local n = select('#', ...)
    if n == 0 then error('at least one coroutine should be specified', 2) end
    for i = 1, n do
      local t = select(i, ...)
      if type(t) == 'thread' then error('attempt to wait on a coroutine that is not a user thread', 2) end
      if type(t) ~= 'table' or not threads[t.id] then return nil, 'already waited or killed' end
      ids[i] = t.id
    end
    local id = lib.wait(unpack(ids))
    local r = threads[id].result
    threads[id] = nil
    return unpack(r, 1, r.n)
  end
  -- a light thread is a table here: coroutine.status answers for it as OpenResty's does for its
  -- coroutine (running until it ends, zombie until waited for, then dead)
  local co_status = coroutine.status
  function coroutine.status(co)
    if getmetatable(co) ~= thread_mt then return co_status(co) end
    local t = threads[co.id]
    if not t then return 'dead' end
    return t.result and 'zombie' or 'running'
  end
  function ngx.thread.kill(t)
    if type(t) ~= 'table' or not threads[t.id] then return nil, 'already waited or killed' end
    if threads[t.id].result then return nil, 'already terminated' end
    threads[t.id] = nil
    lib.kill(t.id)
    return true
  end
end
function ngx.on_abort(f)
  if type(f) ~= 'function' then error("bad argument #1 to 'on_abort' (function expected)", 2) end
  local id, err = host.abort.on_abort()
  if not id then return nil, err end
  threads[id] = { f = f, args = pack() }
  return 1
end
local function run_thread(id)
  local t = threads[id]
  if not t then return end
  local tb
  local r = pack(xpcall(t.f, function(e)
    if e ~= EXIT then tb = debug.traceback(nil, 2) end
    return e
  end, table.unpack(t.args, 1, t.args.n)))
  -- logged with its traceback; ngx.thread.wait gives the message without its position, as OpenResty does
  if not r[1] and r[2] ~= EXIT then
    host.thread.aborted(tostring(r[2]) .. '\n' .. gsub(tb or '', '^stack traceback:\n', 'stack traceback:\ncoroutine 0:\n', 1))
    if type(r[2]) == 'string' then r[2] = gsub(r[2], '^.-:%d+: ', '', 1) end
  end
  if threads[id] then threads[id].result = r end
end

local function run_timer(id, premature, last, refused)
  local t = timers[id]
  if last then timers[id] = nil end
  if not t then return end
  if refused then
    local info = getinfo(t[1], 'S')
    return host.timer.refused('lua failed to run timer with function defined at ' .. info.source .. ':'
      .. info.linedefined .. ': ' .. refused)
  end
  return t[1](premature, table.unpack(t, 2, t.n))
end

ngx.re = host.re_table()
ngx.socket, ngx.req.socket = host.socket.chunk()(host.socket)

-- ndk.set_var.NAME: the set-misc directives NDK hands to Lua, as functions of one value
ndk = { set_var = setmetatable({}, { __index = function(t, name)
  if type(name) ~= 'string' then name = tostring(name) end
  if not host.ndk.has(name) then
    error('ndk.set_var: directive "' .. name .. '" not found or does not use ndk_set_var_value', 2)
  end
  local set_var = host.ndk.set_var
  local f = function(value)
    if type(value) ~= 'string' then value = tostring(value) end
    return set_var(name, value)
  end
  rawset(t, name, f)
  return f
end }) }
package.loaded.ndk = ndk
package.loaded.ngx = ngx
package.preload['ngx.re'] = function() return ngx.re end
do
  local balancer = {}
  for k, f in pairs(host.balancer) do balancer[k] = f end
  package.preload['ngx.balancer'] = function() return balancer end
end
package.preload['ngx.semaphore'] = function() return host.semaphore.chunk()(host.semaphore) end
-- lua-resty-core's other modules (resty.core, ngx.process, ngx.errlog, ...)
host.resty_core.chunk()(host.resty_core)

-- OpenResty's guard on _G: a hook that writes a global is warned, since every request of the
-- worker shares it (init and init_worker may write freely). Its own chunk name, as OpenResty's.
-- (laid out so the warning comes from line 12, as OpenResty's does)
load([[
-- the _G write guard
local ngx_log = ngx.log
local ngx_WARN = ngx.WARN
local tostring = tostring
local rawset = rawset
local get_phase = ngx.get_phase
local traceback = debug.traceback
local function newindex(table, key, value)
  rawset(table, key, value)
  local phase = get_phase()
  if phase == 'init_worker' or phase == 'init' then return end
  ngx_log(ngx_WARN, "writing a global Lua variable ('", tostring(key), "') which may lead to race conditions between concurrent requests, so prefer the use of 'local' variables", traceback('', 2))
end
setmetatable(_G, { __newindex = newindex })
]], '=_G write guard')()

-- the host frees a request's ngx.ctx tables when it is done, runs timers that are due, and light threads,
-- and forgets a hook's light threads when it ends
return function(id) ctxs[id] = nil end, run_timer, run_thread,
  function(...) for i = 1, select('#', ...) do threads[(select(i, ...))] = nil end end
