// The Lua bridge over wasmoon's raw exports (src/lua/bridge.ts), driven directly: no Lua hook
// exists yet, so these check real Lua results through the C API. Expected texts are Lua 5.4's
// (and OpenResty's chunk names, `content_by_lua(nginx.conf:40)`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LuaError, LuaSyntaxError } from '../../src/lua/bridge.ts';
import { LuaVm } from '../../src/lua/vm.ts';
import { pushValue, toValue } from '../../src/lua/convert.ts';

const vm = await LuaVm.create({ print: () => {} });
const { bridge } = vm;
const { api, L } = bridge;

/** Calls a Lua function given as source with `args` pushed by `push`; returns its results as JS values. */
function callLua(source: string, push: (L: number) => number, nresults: number): unknown[] {
  const fn = vm.load(`return ${source}`, 'test');
  bridge.pushRef(L, fn);
  bridge.call(L, 0, 1);
  const nargs = push(L);
  bridge.call(L, nargs, nresults);
  const out = [];
  for (let i = -nresults; i < 0; i++) out.push(toValue(bridge, L, i));
  api.lua_settop(L, 0);
  vm.unload(fn);
  return out;
}

test('strings are bytes both ways: NULs, 0x80-0xff and invalid UTF-8 survive', () => {
  const bytes = Buffer.from([0, 1, 0x7f, 0x80, 0xc3, 0x28, 0xff, 0, 0x41]);
  const fn = vm.load('local s = ... ; return s, #s, s:byte(1, -1)', 'test');
  bridge.pushRef(L, fn);
  bridge.pushBytes(L, bytes);
  bridge.call(L, 1, -1);
  assert.equal(api.lua_gettop(L), 2 + bytes.length);
  assert.deepEqual(bridge.toBuffer(L, 1), bytes);
  assert.equal(bridge.toInteger(L, 2), 9);
  for (let i = 0; i < bytes.length; i++) assert.equal(bridge.toInteger(L, 3 + i), bytes[i]);
  // the latin1 view: one char per byte
  assert.equal(bridge.toString(L, 1), bytes.toString('latin1'));
  api.lua_settop(L, 0);
  assert.deepEqual(callLua('function(s) return s .. "\\0" end', (L1) => (bridge.pushString(L1, 'a\0\xff'), 1), 1), ['a\0\xff\0']);
});

test('a 1 MiB string goes in and out unchanged', () => {
  const big = Buffer.alloc(1 << 20);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7) & 0xff;
  const fn = vm.load('local s = ... ; return s:reverse():reverse()', 'test');
  bridge.pushRef(L, fn);
  bridge.pushBytes(L, big);
  bridge.call(L, 1, 1);
  assert.ok(bridge.toBuffer(L, -1)!.equals(big));
  api.lua_settop(L, 0);
});

test('nil, booleans, integers, floats and tables cross as Lua types', () => {
  const [types] = callLua(
    'function(...) local t = {} for i = 1, select("#", ...) do local v = select(i, ...) t[i] = math.type(v) or type(v) end return table.concat(t, ",") end',
    (L1) => {
      bridge.pushNil(L1);
      bridge.pushBoolean(L1, true);
      bridge.pushJsNumber(L1, 42);
      bridge.pushJsNumber(L1, 1.5);
      bridge.pushNumber(L1, 2);
      bridge.pushInteger(L1, 1700000000n * 1000n);
      pushValue(bridge, L1, { a: [1, 'x'] });
      return 7;
    },
    1,
  );
  assert.equal(types, 'nil,boolean,integer,float,float,integer,table');
  // 64-bit integers (fengari's trap: 32-bit arithmetic) and LuaJIT-style number formatting
  assert.deepEqual(vm.eval('return 1700000000 * 1000, 10 / 2, 2^53, 0.1'), [1700000000000, 5, 9007199254740992, 0.1]);
  const fn = vm.load('return 10 / 2, 1e15, 1 / 3, -0.0, 1 / 0, 3', 'test');
  bridge.pushRef(L, fn);
  bridge.call(L, 0, 6);
  assert.deepEqual([1, 2, 3, 4, 5, 6].map((i) => bridge.toString(L, i)), ['5', '1e+15', '0.33333333333333', '-0', 'inf', '3']);
  api.lua_settop(L, 0);
  assert.deepEqual(vm.eval('return {1, 2, {x = "y"}}, {k = false}'), [[1, 2, { x: 'y' }], { k: false }]);
});

test('a host function reads its arguments and returns results; Lua sees them', () => {
  vm.setGlobalTable('host', {
    concat(L1) {
      const n = api.lua_gettop(L1);
      let s = '';
      for (let i = 1; i <= n; i++) s += bridge.toString(L1, i) ?? `<${bridge.typeName(L1, i)}>`;
      bridge.pushString(L1, s);
      bridge.pushInteger(L1, n);
      return 2;
    },
  });
  assert.deepEqual(vm.eval('return host.concat("a\\0", 1, 2.0, nil, {})'), ['a\x001' + '2<nil><table>', 5]);
});

test('a JavaScript exception in a host function is a Lua error at the call site, and the VM survives thousands', () => {
  vm.setGlobalTable('host', {
    fail() {
      throw new Error('no such thing');
    },
    failBare() {
      throw new LuaError('bare message', 0);
    },
    typeError(L1) {
      return (undefined as unknown as { x: () => number }).x() + L1;
    },
  });
  const [ok, message] = vm.eval('return pcall(function() host.fail() end)');
  assert.equal(ok, false);
  assert.equal(message, 'eval:1: no such thing');
  assert.deepEqual(vm.eval('return pcall(host.failBare)'), [false, 'bare message']);
  const [, typeError] = vm.eval('return pcall(function() host.typeError() end)');
  assert.match(typeError as string, /^eval:1: Cannot read properties of undefined/);
  const chunk = vm.load('local n = 0 for i = 1, 3000 do if not pcall(host.fail) then n = n + 1 end end return n', 'test');
  bridge.pushRef(L, chunk);
  bridge.call(L, 0, 1);
  assert.equal(bridge.toInteger(L, -1), 3000);
  api.lua_settop(L, 0);
  assert.deepEqual(vm.eval('return 1 + 1'), [2]);
});

test('chunks carry OpenResty names in syntax and runtime errors', () => {
  assert.throws(
    () => vm.load('local x = = 1', 'content_by_lua(nginx.conf:40)'),
    (e: unknown) => e instanceof LuaSyntaxError && e.message === "content_by_lua(nginx.conf:40):1: unexpected symbol near '='",
  );
  const chunk = vm.load('\nlocal t = nil\nreturn t.x', 'content_by_lua(nginx.conf:40)');
  bridge.pushRef(L, chunk);
  assert.throws(() => bridge.call(L, 0, 0), { message: "content_by_lua(nginx.conf:40):3: attempt to index a nil value (local 't')" });
  assert.equal(api.lua_gettop(L), 0, 'the error message is popped');
});

test('a chunk loaded with its own globals reads _G but writes to its own table', () => {
  const chunk = vm.load('leaked = (leaked or 0) + 1; return leaked, type(string)', 'test', { ownGlobals: true });
  for (const expected of [1, 2]) {
    bridge.pushRef(L, chunk);
    bridge.call(L, 0, 2);
    assert.deepEqual([toValue(bridge, L, 1), toValue(bridge, L, 2)], [expected, 'table']);
    api.lua_settop(L, 0);
  }
  assert.deepEqual(vm.eval('return leaked'), [undefined]);
});
