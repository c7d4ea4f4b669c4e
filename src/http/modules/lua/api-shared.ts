/**
 * ngx.shared.DICT (lua_shared_dict): the host functions behind the dict
 * objects ngx.lua makes (`dict:get(key)` calls `ops.get(name, key)`), with
 * OpenResty's results and error strings. The store is src/lua/shared-dict.ts,
 * shared by every worker thread; each call holds the dict's lock briefly.
 */
import { LuaError, T } from '../../../lua/bridge.ts';
import type { LuaBridge } from '../../../lua/bridge.ts';
import { listBytes, listItems, SharedDict, TYPE_BOOLEAN, TYPE_LIST, TYPE_NUMBER, TYPE_STRING } from '../../../lua/shared-dict.ts';
import type { ListItem } from '../../../lua/shared-dict.ts';
import { sharedZone } from '../../../core/shared.ts';
import type { LuaRuntime } from './runtime.ts';

/** The two zones of dict `name` (made in the master while it reads the configuration, adopted by workers). */
export function dictZones(name: string, size: number): { index: SharedArrayBuffer; values: SharedArrayBuffer } {
  const indexSize = Math.max(4096, Math.floor(size / 4 / 8) * 8);
  return {
    index: sharedZone(`lua_shared_dict:${name}:index`, indexSize),
    values: sharedZone(`lua_shared_dict:${name}:values`, Math.max(4096, size - indexSize)),
  };
}

function pushValue(bridge: LuaBridge, L: number, dict: SharedDict, slot: number): number {
  const v = dict.read(slot);
  if (v.type === TYPE_LIST) {
    bridge.pushNil(L);
    bridge.pushString(L, 'value is a list');
    return -2;
  }
  if (v.type === TYPE_STRING) bridge.pushBytes(L, v.bytes!);
  else if (v.type === TYPE_NUMBER) bridge.pushJsNumber(L, v.num);
  else bridge.pushBoolean(L, v.num !== 0);
  if (v.flags === 0) return 1;
  bridge.pushInteger(L, v.flags);
  return 2;
}

export function sharedLibrary(rt: LuaRuntime, sizes: Map<string, number>): Record<string, unknown> {
  const { bridge } = rt.vm;
  const dicts = new Map<string, SharedDict>();
  for (const [name, size] of sizes) {
    const z = dictZones(name, size);
    dicts.set(name, new SharedDict(z.index, z.values));
  }
  const dictOf = (L: number): SharedDict => {
    const d = dicts.get(bridge.toString(L, 1) ?? '');
    if (!d) throw new LuaError('bad "zone" argument', 2);
    return d;
  };
  /** The key at 2, or the error result OpenResty gives for a bad one (pushed; the count returned negative). */
  const keyAt = (L: number): string | undefined => {
    if (bridge.type(L, 2) === T.NIL) return undefined;
    return bridge.toString(L, 2);
  };
  const fail = (L: number, err: string, n = 2): number => {
    if (n === 3) bridge.pushBoolean(L, false);
    else bridge.pushNil(L);
    bridge.pushString(L, err);
    if (n === 3) bridge.pushBoolean(L, false);
    return n;
  };
  const badKey = (key: string | undefined): string | undefined =>
    key === undefined ? 'nil key' : key === '' ? 'empty key' : key.length > 65535 ? 'key too long' : undefined;

  const get = (stale: boolean) => (L: number): number => {
    const dict = dictOf(L);
    const key = keyAt(L);
    const bad = badKey(key);
    if (bad) return fail(L, bad);
    const t = dict.table;
    t.lock();
    try {
      const now = Date.now();
      const slot = dict.find(key!, now, stale);
      if (slot === 0) {
        bridge.pushNil(L);
        return 1;
      }
      const n = pushValue(bridge, L, dict, slot);
      if (n < 0) return -n;
      if (!stale) return n;
      if (n === 1) bridge.pushNil(L);
      bridge.pushBoolean(L, dict.expired(slot, now));
      return 3;
    } finally {
      t.unlock();
    }
  };

  /** set/add/replace and their safe_ forms: (name, key, value, exptime, flags) → ok, err, forcible. */
  const store = (mode: 'set' | 'add' | 'replace', evict: boolean) => (L: number): number => {
    const dict = dictOf(L);
    const key = keyAt(L);
    const bad = badKey(key);
    if (bad) return fail(L, bad);
    const vt = bridge.type(L, 3);
    let type = 0;
    let num = 0;
    let view: { ptr: number; len: number } | undefined;
    if (vt === T.STRING) {
      type = TYPE_STRING;
      view = bridge.stringView(L, 3);
    } else if (vt === T.NUMBER) {
      type = TYPE_NUMBER;
      num = bridge.toNumber(L, 3)!;
    } else if (vt === T.BOOLEAN) {
      type = TYPE_BOOLEAN;
      num = bridge.toBoolean(L, 3) ? 1 : 0;
    } else if (vt !== T.NIL) return fail(L, 'bad value type');
    else if (mode !== 'set') return fail(L, 'attempt to add or replace nil values', 3);
    const exptime = bridge.toNumber(L, 4) ?? 0;
    if (exptime < 0) throw new LuaError('bad "exptime" argument', 2);
    const flags = bridge.toInteger(L, 5) ?? 0;
    const t = dict.table;
    t.lock();
    try {
      const now = Date.now();
      const slot = dict.find(key!, now);
      if (mode === 'add' && slot !== 0) return fail(L, 'exists', 3);
      if (mode === 'replace' && slot === 0) return fail(L, 'not found', 3);
      if (vt === T.NIL) {
        if (slot !== 0) dict.remove(slot);
        bridge.pushBoolean(L, true);
        bridge.pushNil(L);
        bridge.pushBoolean(L, false);
        return 3;
      }
      const heap = bridge.bytes();
      const [ok, err, forcible] = dict.store(key!, type, num, view?.len ?? 0,
        view ? (to, at) => to.set(heap.subarray(view.ptr, view.ptr + view.len), at) : undefined, exptime, flags, evict, now);
      bridge.pushBoolean(L, ok);
      if (err === undefined) bridge.pushNil(L);
      else bridge.pushString(L, err);
      bridge.pushBoolean(L, forcible);
      return 3;
    } finally {
      t.unlock();
    }
  };

  const locked = <R>(dict: SharedDict, fn: (now: number) => R): R => {
    dict.table.lock();
    try {
      return fn(Date.now());
    } finally {
      dict.table.unlock();
    }
  };

  /** lpush/rpush: (name, key, value) → the list's length, or nil and OpenResty's error. */
  const push = (left: boolean) => (L: number): number => {
    const dict = dictOf(L);
    const key = keyAt(L);
    const bad = badKey(key);
    if (bad) return fail(L, bad);
    const vt = bridge.type(L, 3);
    let item: ListItem;
    if (vt === T.STRING) item = bridge.toBuffer(L, 3)!;
    else if (vt === T.NUMBER) item = bridge.toNumber(L, 3)!;
    else return fail(L, 'bad value type');
    return locked(dict, (now) => {
      const slot = dict.find(key!, now);
      let items: ListItem[] = [];
      let ttl = 0;
      if (slot !== 0) {
        const v = dict.read(slot);
        if (v.type !== TYPE_LIST) return fail(L, 'value not a list');
        items = listItems(v.bytes!);
        ttl = dict.ttl(slot, now);
      }
      if (left) items.unshift(item);
      else items.push(item);
      const bytes = listBytes(items);
      const [ok, err] = dict.store(key!, TYPE_LIST, 0, bytes.length, (heap, at) => heap.set(bytes, at), ttl, 0, true, now);
      if (!ok) return fail(L, err!);
      bridge.pushInteger(L, items.length);
      return 1;
    });
  };

  /** lpop/rpop: the item, nil when there is no list; an emptied list's key goes, as in OpenResty. */
  const pop = (left: boolean) => (L: number): number => {
    const dict = dictOf(L);
    const key = keyAt(L);
    const bad = badKey(key);
    if (bad) return fail(L, bad);
    return locked(dict, (now) => {
      const slot = dict.find(key!, now);
      if (slot === 0) {
        bridge.pushNil(L);
        return 1;
      }
      const v = dict.read(slot);
      if (v.type !== TYPE_LIST) return fail(L, 'value not a list');
      const items = listItems(v.bytes!);
      const item = left ? items.shift()! : items.pop()!;
      if (items.length === 0) dict.remove(slot);
      else {
        const bytes = listBytes(items);
        dict.store(key!, TYPE_LIST, 0, bytes.length, (heap, at) => heap.set(bytes, at), dict.ttl(slot, now), 0, true, now);
      }
      if (typeof item === 'number') bridge.pushJsNumber(L, item);
      else bridge.pushBytes(L, item);
      return 1;
    });
  };

  const ops = {
    lpush: push(true),
    rpush: push(false),
    lpop: pop(true),
    rpop: pop(false),
    llen(L: number) {
      const dict = dictOf(L);
      const key = keyAt(L);
      const bad = badKey(key);
      if (bad) return fail(L, bad);
      return locked(dict, (now) => {
        const slot = dict.find(key!, now);
        if (slot === 0) {
          bridge.pushInteger(L, 0);
          return 1;
        }
        const v = dict.read(slot);
        if (v.type !== TYPE_LIST) return fail(L, 'value not a list');
        bridge.pushInteger(L, listItems(v.bytes!).length);
        return 1;
      });
    },
    get: get(false),
    get_stale: get(true),
    set: store('set', true),
    safe_set: store('set', false),
    add: store('add', true),
    safe_add: store('add', false),
    replace: store('replace', true),
    delete(L: number) {
      bridge.api.lua_settop(L, 2);
      bridge.pushNil(L);
      return ops.set(L);
    },
    incr(L: number) {
      const dict = dictOf(L);
      const key = keyAt(L);
      const bad = badKey(key);
      if (bad) return fail(L, bad);
      const by = bridge.toNumber(L, 3);
      if (by === undefined) throw new LuaError('bad "value" argument', 2);
      // lua-resty-core's checks: a string that reads as a number is one, anything else is refused
      const init = bridge.toBoolean(L, 4) ? bridge.toNumber(L, 4) : undefined;
      if (bridge.toBoolean(L, 4) && init === undefined) throw new LuaError(`bad init arg: number expected, got ${bridge.typeName(L, 4)}`, 2);
      const initTtl = bridge.type(L, 5) === T.NIL || bridge.type(L, 5) === T.NONE ? 0 : bridge.toNumber(L, 5);
      if (initTtl === undefined) throw new LuaError(`bad init_ttl arg: number expected, got ${bridge.typeName(L, 5)}`, 2);
      if (initTtl < 0) throw new LuaError('bad "init_ttl" argument', 2);
      return locked(dict, (now) => {
        const slot = dict.find(key!, now);
        if (slot === 0) {
          if (init === undefined) return fail(L, 'not found');
          const [ok, err, forcible] = dict.store(key!, TYPE_NUMBER, init + by, 0, undefined, initTtl, 0, true, now);
          if (!ok) return fail(L, err!);
          bridge.pushJsNumber(L, init + by);
          bridge.pushNil(L);
          bridge.pushBoolean(L, forcible);
          return 3;
        }
        if (!dict.isNumber(slot)) return fail(L, 'not a number');
        const n = dict.read(slot).num + by;
        dict.setNumber(slot, n);
        bridge.pushJsNumber(L, n);
        bridge.pushNil(L);
        return 2;
      });
    },
    ttl(L: number) {
      const dict = dictOf(L);
      const key = keyAt(L);
      const bad = badKey(key);
      if (bad) return fail(L, bad);
      return locked(dict, (now) => {
        const slot = dict.find(key!, now);
        if (slot === 0) return fail(L, 'not found');
        bridge.pushJsNumber(L, dict.ttl(slot, now));
        return 1;
      });
    },
    expire(L: number) {
      const dict = dictOf(L);
      const key = keyAt(L);
      const bad = badKey(key);
      if (bad) return fail(L, bad);
      const exptime = bridge.toNumber(L, 3) ?? 0;
      return locked(dict, (now) => {
        const slot = dict.find(key!, now);
        if (slot === 0) return fail(L, 'not found');
        dict.setExpiry(slot, exptime, now);
        bridge.pushBoolean(L, true);
        return 1;
      });
    },
    flush_all(L: number) {
      const dict = dictOf(L);
      locked(dict, (now) => dict.flush(false, 0, now));
      return 0;
    },
    flush_expired(L: number) {
      const dict = dictOf(L);
      bridge.pushInteger(L, locked(dict, (now) => dict.flush(true, bridge.toInteger(L, 2) ?? 0, now)));
      return 1;
    },
    get_keys(L: number) {
      const dict = dictOf(L);
      const keys = locked(dict, (now) => dict.keys(bridge.toInteger(L, 2) ?? 1024, now));
      bridge.api.lua_createtable(L, keys.length, 0);
      keys.forEach((k, i) => { bridge.pushString(L, k); bridge.api.lua_rawseti(L, -2, BigInt(i + 1)); });
      return 1;
    },
    capacity: (L: number) => (bridge.pushInteger(L, dictOf(L).capacity), 1),
    free_space(L: number) {
      const dict = dictOf(L);
      bridge.pushInteger(L, locked(dict, () => dict.freeSpace()));
      return 1;
    },
  };
  return { names: [...dicts.keys()], ops };
}
