// string.buffer as a host module (src/lua/string-buffer.ts); behaviour as LuaJIT's
// (https://luajit.org/ext_buffer.html), the empty-buffer `get()` as OpenResty's LuaJIT gives it ("").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LuaVm } from '../../src/lua/vm.ts';

const vm = await LuaVm.create({ print: () => {} });
vm.eval('buffer = require("string.buffer")');

test('put appends strings, numbers (LuaJIT-formatted) and buffers; methods chain', () => {
  assert.deepEqual(vm.eval('local b = buffer.new() b:put("a\\0b", 1, 2.0, 0.5):putf("%d-%s", 3, "x") return b:tostring(), #b, b:len()'), ['a\0b120.53-x', 11, 11]);
  assert.deepEqual(vm.eval('local a, b = buffer.new(), buffer.new() a:put("x") b:put(a, a) b:put(b) return b:tostring(), a:tostring()'), ['xxxx', 'x']);
});

test('get consumes from the front (FIFO), in pieces; get() on an empty buffer is ""', () => {
  assert.deepEqual(vm.eval('local b = buffer.new() b:put("hello world") local x, y = b:get(5, 1) return x, y, #b, b:get(), b:get(), #b'), ['hello', ' ', 5, 'world', '', 0]);
  assert.deepEqual(vm.eval('local b = buffer.new():put("abc") return b:get(10), b:get(1)'), ['abc', '']);
});

test('set, skip, reset, free; tostring(buf), #buf and buf .. x', () => {
  assert.deepEqual(vm.eval('local b = buffer.new():put("old") b:set("new\\0") return b:tostring(), #b'), ['new\0', 4]);
  assert.deepEqual(vm.eval('local b = buffer.new():put("0123456789") b:skip(3) return b:tostring(), #b:skip(100), b:put("z"):get()'), ['3456789', 0, 'z']);
  assert.deepEqual(vm.eval('local b = buffer.new():put("abc") return tostring(b), #b, b .. "!", "<" .. b, b:reset() == b, #b'), ['abc', 3, 'abc!', '<abc', true, 0]);
  assert.deepEqual(vm.eval('local b = buffer.new():put("abc") b:free() return #b, b:put("again"):get()'), [0, 'again']);
});

test('a buffer grows past many reallocations and keeps bytes exact', () => {
  const [s, len] = vm.eval('local b = buffer.new(1) for i = 0, 9999 do b:put(string.char(i % 256)) if i % 7 == 0 then b:skip(1) end end return b:get(), #b');
  assert.equal(len, 0);
  const expected: number[] = [];
  let skipped = 0;
  for (let i = 0; i <= 9999; i++) {
    expected.push(i % 256);
    if (i % 7 === 0) skipped++;
  }
  assert.deepEqual(Buffer.from(s as string, 'latin1'), Buffer.from(expected.slice(skipped)));
});

test('misuse is a Lua error with the method name', () => {
  const [, notBuffer] = vm.eval('return pcall(buffer.new().put, {}, "x")');
  assert.match(notBuffer as string, /bad argument #1 to 'put' \(buffer expected, got table\)/);
  const [, badArg] = vm.eval('return pcall(function() buffer.new():put({}) end)');
  assert.match(badArg as string, /bad argument #1 to 'put' \(string expected, got table\)/);
});
