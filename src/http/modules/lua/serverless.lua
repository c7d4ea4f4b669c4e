-- The Lua half of the gateway's serverless functions (gateway-functions.ts is the host half):
-- APISIX's check_schema and load_funcs/call_funcs (apisix/plugins/serverless/init.lua), and the
-- api_ctx a function gets as `ctx` (apisix/core/ctx.lua): ctx.var reads and writes the request's
-- variables, the upstream's (upstream_uri, upstream_host, upstream_scheme) included.
local host = ...
local loadstring, pcall, type, ipairs, tostring, setmetatable = loadstring, pcall, type, ipairs, tostring, setmetatable
local ngx = ngx

local function check(source)
  local func, err = loadstring(source)
  if err then return 'failed to loadstring: ' .. err end
  local ok, ret = pcall(func)
  if not ok then return 'pcall error: ' .. tostring(ret) end
  if type(ret) ~= 'function' then
    return 'only accept Lua function, the input code type is ' .. type(ret)
  end
  return nil
end

local function compile(sources)
  local funcs = {}
  for i, source in ipairs(sources) do
    local _, func = pcall(loadstring(source))
    funcs[i] = func
  end
  return funcs
end

local var_mt = {
  __index = function(_, name)
    local value, own = host.var_get(name)
    if own then return value end
    return ngx.var[name]
  end,
  __newindex = function(_, name, value)
    if not host.var_set(name, value) then ngx.var[name] = value end
  end,
}

-- one api_ctx per request, kept in ngx.ctx as APISIX keeps it
local function api_ctx()
  local nctx = ngx.ctx
  local ctx = nctx.api_ctx
  if not ctx then
    ctx = { var = setmetatable({}, var_mt), curr_req_matched = {} }
    nctx.api_ctx = ctx
  end
  local path, matched_host, route_id, service_id, consumer_name = host.route_info()
  ctx.curr_req_matched._path = path
  ctx.curr_req_matched._host = matched_host
  ctx.route_id = route_id
  ctx.service_id = service_id
  ctx.consumer_name = consumer_name
  return ctx
end

local function run(funcs, conf)
  local ctx = api_ctx()
  for _, func in ipairs(funcs) do
    local code, body = func(conf, ctx)
    if code or body then return code, body end
  end
end

-- apisix.core as far as a function usually reaches: core.log, core.response.exit, core.json
local log = {}
for name, level in pairs({ stderr = ngx.STDERR, emerg = ngx.EMERG, alert = ngx.ALERT, crit = ngx.CRIT,
                          error = ngx.ERR, warn = ngx.WARN, notice = ngx.NOTICE, info = ngx.INFO, debug = ngx.DEBUG }) do
  log[name] = function(...) return ngx.log(level, ...) end
end
local json = require('cjson.safe')
local core = {
  log = log,
  json = { encode = json.encode, decode = json.decode },
  response = {
    exit = function(code, body)
      if code then ngx.status = code end
      if body ~= nil then
        if type(body) == 'table' then body = json.encode(body) .. '\n' end
        ngx.print(body)
      end
      if code then return ngx.exit(code) end
      return ngx.exit(ngx.OK)
    end,
    set_header = function(name, value) ngx.header[name] = value end,
  },
  request = {
    header = function(_, name) return ngx.req.get_headers()[name] end,
    get_method = ngx.req.get_method,
  },
}
package.preload['apisix.core'] = function() return core end

return check, compile, run
