// LuaVm (src/lua/vm.ts): one per worker, shared by its requests; each VM has its own wasm memory,
// capped: past the cap Lua gets "not enough memory" and the VM stays usable.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LuaVm } from '../../src/lua/vm.ts';
import { toValue } from '../../src/lua/convert.ts';

test('past the memory cap Lua gets a catchable "not enough memory" and the VM keeps working', async () => {
  const vm = await LuaVm.create({ memoryLimit: 32 * 1024 * 1024, print: () => {} });
  const chunk = vm.load('local t = {} for i = 1, 1e8 do t[i] = string.rep("x", 1000) .. i end', 'content_by_lua(nginx.conf:1)');
  const outcome = vm.run(chunk, 'hog');
  assert.ok(!(outcome instanceof Promise) && !outcome.ok);
  assert.equal(outcome.error, 'not enough memory');
  vm.eval('collectgarbage()');
  assert.deepEqual(vm.eval('return string.rep("ab", 3), #string.rep("y", 1e6)'), ['ababab', 1e6]);
  const [ok, err] = vm.eval('return pcall(string.rep, "z", 1e9)');
  assert.deepEqual([ok, err], [false, 'not enough memory']);
  vm.close();
});

test('requests of one VM share its globals and modules; two VMs share nothing', async () => {
  const a = await LuaVm.create({ print: () => {} });
  const b = await LuaVm.create({ print: () => {} });
  const counter = a.load('count = (count or 0) + 1 return count', 'content_by_lua(nginx.conf:2)');
  const read = (o: unknown) => (o as { ok: true; value: unknown }).value;
  const results = (L: number) => toValue(a.bridge, L, -1);
  assert.equal(read(a.run(counter, 'r1', { results })), 1);
  assert.equal(read(a.run(counter, 'r2', { results })), 2);
  assert.deepEqual(b.eval('return count'), [undefined]);
  a.close();
  b.close();
});

test('runaway recursion, in Lua and through host calls, is a Lua error and the VM keeps working', async () => {
  const vm = await LuaVm.create({ print: () => {} });
  vm.setGlobalTable('host', {
    // calls its Lua argument back, so recursion goes Lua → host → Lua
    call(L) {
      vm.bridge.api.lua_callk(L, 0, 1, 0, 0);
      return 1;
    },
  });
  const cases: Array<[string, string]> = [
    ['local function f() return f() + 1 end f()', 'content_by_lua(nginx.conf:1):1: stack overflow'],
    ['local function f() local ok, e = pcall(f) if not ok then error(e, 0) end end f()', 'C stack overflow'],
    ['local function f() return host.call(f) end f()', 'C stack overflow'],
    ['local function f(s) return (string.gsub(s, "a", function() return f(s) end)) end f("a")', 'C stack overflow'],
  ];
  for (const [code, error] of cases) {
    const outcome = vm.run(vm.load(code, 'content_by_lua(nginx.conf:1)'), null);
    assert.ok(!(outcome instanceof Promise) && !outcome.ok, code);
    assert.equal(outcome.error, error, code);
  }
  assert.deepEqual(vm.eval('return 1 + 1'), [2]);
  vm.close();
});
