/**
 * The Lua bridge's costs, one figure per line (docs/lua.md has the table and how to read it):
 * JS→Lua call with a short string, a hook run in a coroutine, Lua→JS host call, a 16 KiB chunk
 * in and out, string.buffer put/get, ngx.re.match, pure Lua CPU (fib 25).
 * Run: node_modules/node/bin/node bench/lua-bridge.ts   (not part of `npm run bench` or the tests)
 */
import { regexTable } from '../src/lua/re.ts';
import { LuaVm } from '../src/lua/vm.ts';

const vm = await LuaVm.create();
const { bridge } = vm;
const { api, L } = bridge;

/**
 * CPU nanoseconds per iteration (user + system, so a busy machine's waiting is not counted): best
 * of 5 runs of `n` iterations, after a warm-up run.
 */
function measure(name: string, n: number, body: (n: number) => void): void {
  body(Math.max(1, n / 10));
  let best = Infinity;
  for (let run = 0; run < 5; run++) {
    const c0 = process.cpuUsage();
    body(n);
    const c = process.cpuUsage(c0);
    best = Math.min(best, ((c.user + c.system) * 1000) / n);
  }
  const text = best >= 10_000 ? `${(best / 1e6).toFixed(2)} ms` : best >= 1000 ? `${(best / 1000).toFixed(2)} µs` : `${best.toFixed(0)} ns`;
  console.log(`${name.padEnd(44)} ${text}`);
}

const echo = vm.load('return function(s) return s end', 'bench');
const [echoFn] = [(() => { bridge.pushRef(L, echo); bridge.call(L, 0, 1); return bridge.ref(L); })()];

measure('JS→Lua call, short string (pcall)', 200_000, (n) => {
  for (let i = 0; i < n; i++) {
    bridge.pushRef(L, echoFn);
    bridge.pushString(L, 'hello');
    bridge.call(L, 1, 1);
    bridge.toString(L, -1);
    api.lua_settop(L, 0);
  }
});

const hook = vm.load('local s = ... ; return s', 'content_by_lua(bench:1)');
measure('hook in a coroutine, short string in and out', 200_000, (n) => {
  for (let i = 0; i < n; i++) {
    vm.run(hook, null, {
      args: (T) => { bridge.pushString(T, 'hello'); return 1; },
      results: (T) => bridge.toString(T, -1),
    });
  }
});

vm.setGlobalTable('host', {
  len(T) {
    bridge.pushInteger(T, bridge.toString(T, 1)!.length);
    return 1;
  },
});
const loop = vm.load('local f, n = host.len, ... ; for i = 1, n do f("hello") end', 'bench');
measure('Lua→JS host call, short string', 1_000_000, (n) => {
  bridge.pushRef(L, loop);
  bridge.pushInteger(L, n);
  bridge.call(L, 1, 0);
});

const chunk = Buffer.alloc(16384, 'abcdefgh\0');
measure('16 KiB chunk in and out (copy both ways)', 20_000, (n) => {
  for (let i = 0; i < n; i++) {
    bridge.pushRef(L, echoFn);
    bridge.pushBytes(L, chunk);
    bridge.call(L, 1, 1);
    bridge.toBuffer(L, -1);
    api.lua_settop(L, 0);
  }
});

const upper = vm.load('return function(s) return string.upper(s) end', 'bench');
bridge.pushRef(L, upper);
bridge.call(L, 0, 1);
const upperFn = bridge.ref(L);
measure('16 KiB chunk through string.upper', 20_000, (n) => {
  for (let i = 0; i < n; i++) {
    bridge.pushRef(L, upperFn);
    bridge.pushBytes(L, chunk);
    bridge.call(L, 1, 1);
    bridge.toBuffer(L, -1);
    api.lua_settop(L, 0);
  }
});

const buffers = vm.load(
  'local n = ... ; local b = require("string.buffer").new(); for i = 1, n do b:put("abc", i); b:get() end',
  'bench',
);
measure('string.buffer put + get', 200_000, (n) => {
  bridge.pushRef(L, buffers);
  bridge.pushInteger(L, n);
  bridge.call(L, 1, 0);
});

regexTable(bridge)(L);
bridge.setGlobal(L, 're');
const regex = vm.load('local n = ... ; local m = re.match for i = 1, n do m("GET /api/v1/users/12345 HTTP/1.1", [[/users/(\\d+)]], "jo") end', 'bench');
measure('ngx.re.match with a capture, short subject', 100_000, (n) => {
  bridge.pushRef(L, regex);
  bridge.pushInteger(L, n);
  bridge.call(L, 1, 0);
});

const fib = vm.load('local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end; return fib(25)', 'bench');
measure('pure Lua CPU: fib(25)', 5, (n) => {
  for (let i = 0; i < n; i++) {
    bridge.pushRef(L, fib);
    bridge.call(L, 0, 1);
    api.lua_settop(L, 0);
  }
});
