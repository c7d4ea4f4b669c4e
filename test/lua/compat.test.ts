// The LuaJIT/5.1 compatibility layer and sandbox (src/lua/compat.lua, package.lua). Expected values
// were taken from Debian's nginx + libnginx-mod-http-lua (LuaJIT 2.1) running the same expressions
// in content_by_lua_block.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LuaVm } from '../../src/lua/vm.ts';

const printed: string[] = [];
const vm = await LuaVm.create({ print: (line) => printed.push(line) });

test('integral floats print as LuaJIT prints them in tostring, print and string.format', () => {
  assert.deepEqual(vm.eval('return tostring(10/2), tostring(1e15), tostring(2^53), tostring(-0.0), tostring(0/0), tostring(1/3), tostring(7)'), [
    '5', '1e+15', '9.007199254741e+15', '-0', 'nan', '0.33333333333333', '7',
  ]);
  assert.deepEqual(vm.eval('return string.format("%s %d %x %s %5.2f", 10/2, 7.9, 255.0, "s", 1.5)'), ['5 7 ff s  1.50']);
  assert.deepEqual(vm.eval('return string.format("%d%%", 3)'), ['3%']);
  vm.eval('print("a", 2.0, nil, true, 1.5)');
  assert.deepEqual(printed, ['a\t2\tnil\ttrue\t1.5']);
});

test('Lua 5.1 globals: unpack, loadstring, setfenv/getfenv, module, _VERSION', () => {
  assert.deepEqual(vm.eval('return unpack({1, 2, 3})'), [1, 2, 3]);
  assert.deepEqual(vm.eval('return loadstring("return 1 + 1")()'), [2]);
  assert.deepEqual(vm.eval('local f, err = loadstring("x =", "=chunk") return f, err'), [undefined, "chunk:1: unexpected symbol near <eof>"]);
  assert.deepEqual(vm.eval('local function f() return x end setfenv(f, {x = 42}) return f(), getfenv(f).x, getfenv(0) == _G, getfenv() == _G'), [42, 42, true, true]);
  // setfenv(1, t) changes the calling function's environment, as module() needs
  assert.deepEqual(vm.eval('local function f() setfenv(1, {y = "env"}) return y end return f()'), ['env']);
  assert.deepEqual(
    vm.eval('package.preload["mymod"] = function(...) module(..., package.seeall) function hello() return "hi " .. type(print) end end; local m = require("mymod") return m.hello(), m._NAME, mymod == m, hello'),
    ['hi function', 'mymod', true, undefined],
  );
  assert.deepEqual(vm.eval('return _VERSION'), ['Lua 5.1']);
});

test('bit: LuaJIT BitOp on signed 32-bit values', () => {
  assert.deepEqual(
    vm.eval('return bit.band(0xffffffff, 0xff), bit.bor(1, 2, 4), bit.bxor(5, 3), bit.bnot(0), bit.lshift(1, 31), bit.rshift(-1, 28), bit.arshift(-256, 4)'),
    [255, 7, 6, -1, -2147483648, 15, -16],
  );
  assert.deepEqual(
    vm.eval('return bit.tohex(255), bit.tohex(-1, -4), bit.tohex(255, 12), bit.tobit(2^32 + 5), bit.tobit(0xffffffff), bit.tobit(2.5), bit.tobit(3.5), bit.tobit(-2.5)'),
    ['000000ff', 'FFFF', '000000ff', 5, -1, 2, 4, -2],
  );
  assert.deepEqual(vm.eval('return bit.rol(0x12345678, 8), bit.ror(0x12345678, 8), bit.bswap(0x12345678), require("bit") == bit'), [0x34567812, 0x78123456, 0x78563412, true]);
});

test('table.new/clear/nkeys (also through require), math.pow and the other LuaJIT math functions', () => {
  assert.deepEqual(
    vm.eval('local new, clear, nkeys = require("table.new"), require("table.clear"), require("table.nkeys") local t = new(4, 2) t[1], t[2], t.x = 1, 2, 3 local n = nkeys(t) clear(t) return n, next(t)'),
    [3, undefined],
  );
  assert.deepEqual(vm.eval('return math.pow(2, 10), math.log10(1000), math.ldexp(0.5, 4), table.getn({1, 2}), table.maxn({[5] = 1}), math.frexp(8)'), [1024, 3, 8, 2, 5, 0.5, 4]);
});

test('sandbox: no os.exit, os.execute, io.popen; ffi and jit refused by name', () => {
  assert.deepEqual(vm.eval('return os.exit, os.execute, io.popen'), [undefined, undefined, undefined]);
  assert.deepEqual(vm.eval('return pcall(require, "ffi")'), [false, "module 'ffi' is not available in Gatehouse: the Lua VM is Lua 5.4 in WebAssembly, which has no FFI"]);
});

test('require reads package.path from the filesystem; built-in modules win; C modules are refused', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gatehouse-lua-'));
  try {
    fs.mkdirSync(path.join(dir, 'app'));
    fs.writeFileSync(path.join(dir, 'app', 'util.lua'), 'local M = {} function M.twice(x) return x * 2 end return M\n');
    fs.writeFileSync(path.join(dir, 'bit.lua'), 'return "the file, not the built-in"\n');
    fs.writeFileSync(path.join(dir, 'broken.lua'), 'return +\n');
    fs.writeFileSync(path.join(dir, 'native.so'), '');
    vm.setPackagePath(`${dir}/?.lua;${dir}/?/init.lua`, `${dir}/?.so`);
    assert.deepEqual(vm.eval('return require("app.util").twice(21), require("bit") == bit'), [42, true]);
    const [, notFound] = vm.eval('return pcall(require, "nope")');
    assert.equal(
      notFound,
      `module 'nope' not found:\n\tno field package.preload['nope']\n\tno file '${dir}/nope.lua'\n\tno file '${dir}/nope/init.lua'\n\tno file '${dir}/nope.so'`,
    );
    const [, broken] = vm.eval('return pcall(require, "broken")');
    assert.equal(broken, `error loading module 'broken' from file '${dir}/broken.lua':\n\t${dir}/broken.lua:1: unexpected symbol near '+'`);
    const [, native] = vm.eval('return pcall(require, "native")');
    assert.match(native as string, /^error loading module 'native' from file '.*native\.so':\n\tC modules are not supported/);
    assert.deepEqual(vm.eval(`return dofile("${dir}/app/util.lua").twice(2)`), [4]);
  } finally {
    fs.rmSync(dir, { recursive: true });
  }
});

test('io.open and io.lines read and write real files, bytes exact; failures as Lua reports them', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gatehouse-lua-'));
  try {
    const file = path.join(dir, 'data.txt');
    fs.writeFileSync(file, Buffer.from('first\nsecond\r\n\0\xff\nlast', 'latin1'));
    assert.deepEqual(vm.eval(`local f = io.open("${file}") local a = f:read("*l") local b = f:read("L") local rest = f:read("*a") f:close() return a, b, rest, io.type(f)`), ['first', 'second\r\n', '\0\xff\nlast', 'closed file']);
    assert.deepEqual(vm.eval(`local t = {} for line in io.lines("${file}") do t[#t + 1] = #line end return table.concat(t, ",")`), ['5,7,2,4']);
    assert.deepEqual(vm.eval(`local f = io.open("${file}", "rb") local a, b = f:read(3, 2) f:seek("set", 1) local c = f:read(1) local size = f:seek("end") f:close() return a, b, c, size`), ['fir', 'st', 'i', 21]);
    assert.deepEqual(vm.eval(`local f = io.open("${dir}/out.bin", "w") f:write("a\\0b", 1, 2.0) f:close() f = io.open("${dir}/out.bin", "a") f:write("!") f:close() return io.open("${dir}/out.bin"):read("a")`), ['a\0b12!']);
    assert.deepEqual(vm.eval(`return io.open("${dir}/missing")`), [undefined, `${dir}/missing: No such file or directory`, 2]);
    assert.deepEqual(vm.eval('return pcall(function() local f = io.open("' + file + '") f:close() return f:read() end)').slice(0, 1), [false]);
  } finally {
    fs.rmSync(dir, { recursive: true });
  }
});
