// Hooks in coroutines (src/lua/coroutine.ts): synchronous when Lua never waits, a promise when a
// host function suspends; errors as OpenResty logs them (checked against Debian's nginx +
// libnginx-mod-http-lua: `lua entry thread aborted: runtime error: …` and its traceback).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { abortedMessage } from '../../src/lua/coroutine.ts';
import { LuaError } from '../../src/lua/bridge.ts';
import { LuaVm } from '../../src/lua/vm.ts';
import { toValue } from '../../src/lua/convert.ts';

const vm = await LuaVm.create({ print: () => {} });
const { bridge } = vm;

/** Host promises the test settles itself, so the order of events is the test's, not the clock's. */
const gates = new Map<string, { resolve: (v: string) => void; reject: (e: Error) => void }>();
vm.setGlobalTable('host', {
  // sleep(ms) on a real timer, returns the context's name after waking (as ngx.sleep would find its request)
  sleep(L) {
    const ms = bridge.toNumber(L, 1) ?? 0;
    return bridge.suspend(sleep(ms), (L1) => {
      bridge.pushString(L1, String(vm.running?.context));
      return 1;
    });
  },
  // wait(name) until the test opens gate `name`; gives back the value, or raises the rejection
  wait(L) {
    const name = bridge.toString(L, 1)!;
    const promise = new Promise<string>((resolve, reject) => gates.set(name, { resolve, reject }));
    return bridge.suspend(promise, (L1, value) => {
      bridge.pushString(L1, value);
      return 1;
    });
  },
  context(L) {
    bridge.pushString(L, String(vm.running?.context));
    return 1;
  },
});

/** The gate `name` once Lua has reached it. */
async function opened(name: string) {
  while (!gates.has(name)) await new Promise(setImmediate);
  return gates.get(name)!;
}

const results = (L: number, n: number) => Array.from({ length: n }, (_, i) => toValue(bridge, L, i - n));

test('a hook that never waits runs synchronously: no promise', () => {
  const chunk = vm.load('local a, b = ... ; return a .. b, host.context()', 'content_by_lua(nginx.conf:1)');
  const outcome = vm.run(chunk, 'req1', { args: (L) => (bridge.pushString(L, 'x\0'), bridge.pushString(L, 'y'), 2), results });
  assert.ok(!(outcome instanceof Promise));
  assert.deepEqual(outcome, { ok: true, value: ['x\0y', 'req1'] });
});

test('a host function that suspends yields the coroutine over a real timer; the request is found after resuming', async () => {
  const chunk = vm.load('local a = host.sleep(5) local b = host.sleep(1) return a, b, host.context()', 'content_by_lua(nginx.conf:2)');
  const outcome = vm.run(chunk, 'sleeper', { results });
  assert.ok(outcome instanceof Promise);
  assert.equal(vm.running, null, 'nothing runs while the coroutine waits');
  assert.deepEqual(await outcome, { ok: true, value: ['sleeper', 'sleeper', 'sleeper'] });
});

test('coroutines of different requests interleave, each resumed with its own result', async () => {
  const chunk = vm.load('local got = host.wait(...) return got .. ":" .. host.context()', 'content_by_lua(nginx.conf:3)');
  const a = vm.run(chunk, 'A', { args: (L) => (bridge.pushString(L, 'a'), 1), results });
  const b = vm.run(chunk, 'B', { args: (L) => (bridge.pushString(L, 'b'), 1), results });
  const order: string[] = [];
  const done = [a, b].map((p, i) => (p as Promise<unknown>).then(() => order.push('AB'[i]!)));
  gates.get('b')!.resolve('second\0');
  await done[1];
  gates.get('a')!.resolve('first');
  await done[0];
  assert.deepEqual(order, ['B', 'A']);
  assert.deepEqual(await a, { ok: true, value: ['first:A'] });
  assert.deepEqual(await b, { ok: true, value: ['second\0:B'] });
});

test('a rejected promise is a Lua error where the host function was called: pcall catches it', async () => {
  const chunk = vm.load('local ok, err = pcall(host.wait, "r") return ok, err, host.sleep(0)', 'content_by_lua(nginx.conf:4)');
  const outcome = vm.run(chunk, 'R', { results });
  gates.get('r')!.reject(new LuaError('timeout', 0));
  assert.deepEqual(await outcome, { ok: true, value: [false, 'timeout', 'R'] });
});

test('an error after a yield aborts the entry thread with OpenResty message and traceback', async () => {
  const chunk = vm.load('\nlocal function inner()\n  host.sleep(1)\n  error("boom")\nend\ninner()\n', 'content_by_lua(nginx.conf:40)');
  const outcome = await vm.run(chunk, 'E');
  assert.equal(outcome.ok, false);
  assert.ok(!outcome.ok);
  assert.equal(
    abortedMessage(outcome),
    'lua entry thread aborted: runtime error: content_by_lua(nginx.conf:40):4: boom\n' +
      'stack traceback:\ncoroutine 0:\n' +
      "\t[C]: in function 'error'\n" +
      "\tcontent_by_lua(nginx.conf:40):4: in function 'inner'\n" +
      '\tcontent_by_lua(nginx.conf:40):6: in main chunk',
  );
  // LuaJIT's wording for the common VM errors (nginx: "attempt to index local 't' (a nil value)")
  const nilIndex = vm.run(vm.load('local t = nil\nreturn t.x', 'content_by_lua(nginx.conf:10)'), 'N');
  assert.ok(!(nilIndex instanceof Promise) && !nilIndex.ok);
  assert.equal(nilIndex.error, "content_by_lua(nginx.conf:10):2: attempt to index local 't' (a nil value)");
});

test('a coroutine.yield straight from the hook is resumed; a suspension outside a coroutine is refused', async () => {
  const chunk = vm.load('coroutine.yield() return "after"', 'content_by_lua(nginx.conf:5)');
  assert.deepEqual(await vm.run(chunk, 'Y', { results }), { ok: true, value: ['after'] });
  const [ok, err] = vm.eval('return pcall(host.sleep, 1)');
  assert.equal(ok, false);
  assert.equal(err, 'attempt to yield across a C-call boundary');
});

test('threads are reused: thousands of hooks, failing or not, leave the VM working', async () => {
  const good = vm.load('return (...) + 1', 'content_by_lua(nginx.conf:6)');
  const bad = vm.load('error("x")', 'content_by_lua(nginx.conf:7)');
  for (let i = 0; i < 3000; i++) {
    const outcome = vm.run(i % 3 ? good : bad, i, { args: (L) => (bridge.pushInteger(L, i), 1), results });
    assert.ok(!(outcome instanceof Promise));
    assert.deepEqual(outcome.ok ? outcome.value : outcome.error, i % 3 ? [i + 1] : 'content_by_lua(nginx.conf:7):1: x');
  }
  const waiting = Array.from({ length: 100 }, (_, i) => vm.run(vm.load('return host.sleep(1)', 'w'), `w${i}`, { results }));
  const all = await Promise.all(waiting);
  assert.deepEqual(all.map((o) => (o.ok ? o.value : o.error)), Array.from({ length: 100 }, (_, i) => [`w${i}`]));
});

test('a host wait inside user coroutines (coroutine.wrap, nested) waits in the hook and resumes the right coroutine', async () => {
  const chunk = vm.load(
    `local reader = coroutine.wrap(function()
       for i = 1, 2 do coroutine.yield(host.wait("chunk" .. i)) end
       return "done"
     end)
     local outer = coroutine.create(function()
       local got = {}
       for _ = 1, 3 do got[#got + 1] = reader() end
       return table.concat(got, ","), host.sleep(1)
     end)
     local ok, joined, ctx = coroutine.resume(outer)
     local ok2, err = pcall(host.wait, "fail")
     return ok, joined, ctx, ok2, err, coroutine.status(outer)`,
    'content_by_lua(nginx.conf:8)',
  );
  const outcome = vm.run(chunk, 'U', { results });
  assert.ok(outcome instanceof Promise);
  (await opened('chunk1')).resolve('one');
  (await opened('chunk2')).resolve('two\0');
  (await opened('fail')).reject(new LuaError('closed', 0));
  assert.deepEqual(await outcome, { ok: true, value: [true, 'one,two\0,done', 'U', false, 'closed', 'dead'] });
});

test('ordinary user coroutines behave as before: generators, values both ways, errors as LuaJIT propagates them', () => {
  assert.deepEqual(vm.eval('local t = {} for v in coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i, i * 2) end end) do t[#t + 1] = v end return table.concat(t, ",")'), ['1,2,3']);
  assert.deepEqual(
    vm.eval('local co = coroutine.create(function(a) local b = coroutine.yield(a + 1) return b * 2 end) local _, x = coroutine.resume(co, 1) local _, y = coroutine.resume(co, 10) return x, y, coroutine.status(co), coroutine.resume(co)'),
    [2, 20, 'dead', false, 'cannot resume dead coroutine'],
  );
  assert.deepEqual(vm.eval('return pcall(coroutine.wrap(function() error("inner", 0) end))'), [false, 'inner']);
  assert.deepEqual(vm.eval('return pcall(coroutine.wrap(function() error({code = 7}) end))').map((v) => (v as { code?: number })?.code ?? v), [false, 7]);
});
