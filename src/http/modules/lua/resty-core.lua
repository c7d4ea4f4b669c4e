-- lua-resty-core's modules, built in: what OpenResty code requires by name (ngx.process,
-- ngx.errlog, ngx.base64, ngx.resp, ngx.req, resty.core.*) answers as lua-resty-core 0.1.25 does,
-- with its argument checks and messages. Its files need LuaJIT's FFI; these are registered in
-- package.preload, so they win over those files on lua_package_path. api-resty-core.ts is the
-- host half. ngx.re, ngx.balancer and ngx.semaphore are registered by ngx.lua.
local host = ...
local VERSION = '0.1.25'
local preload = package.preload
local type, error, tostring, select, ipairs = type, error, tostring, select, ipairs

local function needs_ffi(name)
  return function()
    error(name .. ' needs the FFI, which Gatehouse\'s Lua VM (Lua 5.4 in WebAssembly) does not have', 2)
  end
end

-- ---- ngx.process ----
do
  local _M = { version = VERSION }
  local get_phase = ngx.get_phase
  function _M.type()
    -- init_by_lua runs before the workers exist: nginx's process there is the master
    if get_phase() == 'init' then return host.master_process() and 'master' or 'single' end
    return host.process_type()
  end
  function _M.enable_privileged_agent(connections)
    if get_phase() ~= 'init' then return nil, 'API disabled in the current context' end
    connections = connections or 512
    if type(connections) ~= 'number' or connections < 0 then
      return nil, "bad 'connections' argument: number expected and greater than 0"
    end
    host.enable_privileged_agent()
    return true
  end
  _M.signal_graceful_exit = host.signal_graceful_exit
  _M.get_master_pid = host.master_pid
  preload['ngx.process'] = function() return _M end
end

-- ---- ngx.errlog ----
do
  local _M = { version = VERSION }
  function _M.raw_log(level, msg)
    if type(level) ~= 'number' then error("bad argument #1 to 'raw_log' (must be a number)", 2) end
    if type(msg) ~= 'string' then error("bad argument #2 to 'raw_log' (must be a string)", 2) end
    host.raw_log(level, msg)
  end
  _M.get_sys_filter_level = host.sys_filter_level
  -- capturing the error log in memory (lua_capture_error_log) is not built
  local no_capture = 'directive "lua_capture_error_log" is not set'
  function _M.set_filter_level(level)
    if not level then return nil, [[missing "level" argument]] end
    return nil, no_capture
  end
  function _M.get_logs() return nil, no_capture end
  preload['ngx.errlog'] = function() return _M end
end

-- ---- ngx.base64 ----
do
  local _M = { version = VERSION }
  function _M.encode_base64url(s)
    if type(s) ~= 'string' then return nil, 'must provide a string' end
    return host.encode_base64url(s)
  end
  function _M.decode_base64url(s)
    if type(s) ~= 'string' then return nil, 'must provide a string' end
    local out = host.decode_base64url(s)
    if out == nil then return nil, 'invalid input' end
    return out
  end
  preload['ngx.base64'] = function() return _M end
end

-- ---- ngx.resp and ngx.req: add_header appends to what is there ----
local function appended(old, value)
  local list = type(old) == 'table' and old or { old }
  if type(value) == 'table' then
    for _, v in ipairs(value) do list[#list + 1] = v end
  else
    list[#list + 1] = value
  end
  return list
end

local function set_resp_header(_, key, value, no_override)
  local old = no_override and ngx.header[key] or nil
  ngx.header[key] = old == nil and value or appended(old, value)
end

do
  local _M = { version = VERSION }
  function _M.add_header(key, value) set_resp_header(nil, key, value, true) end
  preload['ngx.resp'] = function() return _M end
end

do
  local _M = { version = VERSION }
  function _M.add_header(key, value)
    if type(key) ~= 'string' then error('bad argument #1 to \'add_header\' (string expected, got ' .. type(key) .. ')', 2) end
    local old = ngx.req.get_headers(0)[key]
    ngx.req.set_header(key, old == nil and value or appended(old, value))
  end
  preload['ngx.req'] = function() return _M end
end

-- ---- resty.core.* ----
local base = {
  version = VERSION,
  FFI_OK = 0, FFI_ERROR = -1, FFI_AGAIN = -2, FFI_BUSY = -3, FFI_DONE = -4, FFI_DECLINED = -5,
  FFI_NO_REQ_CTX = -100, FFI_BAD_CONTEXT = -101,
  new_tab = table.new, clear_tab = table.clear,
  get_request = host.request_token,
}
-- the free list of ref_in_table lives at index 0 of the table, as in lua-resty-core
function base.ref_in_table(tb, key)
  if key == nil then return -1 end
  local ref = tb[0]
  if ref and ref ~= 0 then
    tb[0] = tb[ref]
  else
    ref = #tb + 1
  end
  tb[ref] = key
  return ref
end
function base.allows_subsystem(...)
  for i = 1, select('#', ...) do
    if select(i, ...) == 'http' then return end
  end
  error('unsupported subsystem: http', 2)
end
for _, name in ipairs({ 'get_errmsg_ptr', 'get_string_buf', 'get_string_buf_size', 'get_size_ptr', 'set_string_buf_size' }) do
  base[name] = needs_ffi('resty.core.base.' .. name)
end
preload['resty.core.base'] = function() return base end

-- resty.core.regex: the compile step, for code that checks a regex before using it
do
  local re_find = ngx.re.find
  local _M = { version = VERSION }
  function _M.re_match_compile(regex, opts)
    local _, _, err = re_find('', regex, opts)
    if err then return nil, err end
    return { regex = regex, options = opts }, opts ~= nil and opts:find('o', 1, true) ~= nil, 0
  end
  _M.set_buf_grow_ratio = function() end
  for _, name in ipairs({ 'collect_captures', 'destroy_compiled_regex', 'is_regex_cache_empty', 're_sub_compile', 'check_buf_size' }) do
    _M[name] = needs_ffi('resty.core.regex.' .. name)
  end
  preload['resty.core.regex'] = function() return _M end
end

do
  local monotonic_msec = host.monotonic_msec
  local time = { version = VERSION, monotonic_msec = monotonic_msec }
  function time.monotonic_time() return monotonic_msec() / 1000 end
  preload['resty.core.time'] = function() return time end
end

preload['resty.core.response'] = function() return { version = VERSION, set_resp_header = set_resp_header } end
preload['resty.core.ctx'] = function()
  return { version = VERSION, get_ctx_table = function() return ngx.ctx end }
end
preload['resty.core.utils'] = function()
  return {
    version = VERSION,
    str_replace_char = function(str, find, replace)
      local pattern = find:gsub('%W', '%%%0')
      return (str:gsub(pattern, (replace:gsub('%%', '%%%%'))))
    end,
  }
end
-- the others only replace ngx.* functions with FFI versions when loaded: nothing to do
for _, name in ipairs({ 'base64', 'coroutine', 'exit', 'hash', 'misc', 'ndk', 'param', 'phase', 'request',
    'shdict', 'socket', 'uri', 'var', 'worker' }) do
  preload['resty.core.' .. name] = function() return { version = VERSION } end
end
-- resty.core itself loads all of them
preload['resty.core'] = function() return { version = VERSION } end
