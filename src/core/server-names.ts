/**
 * Choosing the virtual server by name, as nginx's
 * ngx_http_find_virtual_server and ngx_stream_find_virtual_server do (a
 * request's Host, a TLS SNI, a preread SNI): the exact name, then the
 * longest leading wildcard (`*.example.com`, `.example.com`), then the
 * longest trailing wildcard (`www.example.*`), then regexes in the order
 * written; otherwise the address's default server. The table is built once
 * per address and configuration.
 */
import os from 'node:os';
import type { ConfContext } from '../conf/context.ts';
import { compileHttpRegex } from './regex.ts';
import type { NamedIndexes } from './regex.ts';
import type { VariableHost, VariableRegistry } from './variables.ts';

/** One `server_name` argument. */
export interface ServerName {
  /** Lowercased; a regex name without its `~`. */
  name: string;
  regex?: RegExp;
  /** Named groups of a regex name (they become variables). */
  httpRegex?: { namedIndexes: NamedIndexes };
}

/** A server block with names. */
export interface NamedServer {
  names: ServerName[];
}

/** An address and the servers that listen on it. */
export interface NamedAddress<S extends NamedServer> {
  servers: S[];
  defaultServer: S;
}

interface NameTable<ServerConf> {
  exact: Map<string, ServerConf>;
  /** `*.x` and `.x` as the suffix `.x`, longest first. */
  leading: Array<{ suffix: string; server: ServerConf }>;
  /** `x.*` as the prefix `x.`, longest first. */
  trailing: Array<{ prefix: string; server: ServerConf }>;
  regex: Array<{ regex: RegExp; named: NamedIndexes | undefined; server: ServerConf }>;
  /** One server with one plain name: every host gets the default server. */
  trivial: boolean;
}

export interface ServerMatch<ServerConf = NamedServer> {
  server: ServerConf;
  /** The server_name regex match ($1.., named captures become variables). */
  match?: RegExpExecArray;
  named?: NamedIndexes;
  /** $0..$9 of that match. */
  captures?: string[];
}

const tables = new WeakMap<object, NameTable<never>>();

/** Builds the lookup table of `addr` (the first server to claim a name keeps it, as in nginx). */
export function nameTable<ServerConf extends NamedServer>(addr: NamedAddress<ServerConf>): NameTable<ServerConf> {
  let t = tables.get(addr) as NameTable<ServerConf> | undefined;
  if (t) return t;
  t = { exact: new Map(), leading: [], trailing: [], regex: [], trivial: false };
  const leadingSeen = new Set<string>();
  const trailingSeen = new Set<string>();
  for (const srv of addr.servers) {
    for (const n of srv.names) {
      if (n.regex) {
        t.regex.push({ regex: n.regex, named: n.httpRegex?.namedIndexes, server: srv });
        continue;
      }
      const name = n.name;
      if (name.startsWith('.')) {
        if (!t.exact.has(name.slice(1))) t.exact.set(name.slice(1), srv);
        if (!leadingSeen.has(name)) { leadingSeen.add(name); t.leading.push({ suffix: name, server: srv }); }
      } else if (name.startsWith('*.')) {
        const suffix = name.slice(1);
        if (!leadingSeen.has(suffix)) { leadingSeen.add(suffix); t.leading.push({ suffix, server: srv }); }
      } else if (name.endsWith('.*')) {
        const prefix = name.slice(0, -1);
        if (!trailingSeen.has(prefix)) { trailingSeen.add(prefix); t.trailing.push({ prefix, server: srv }); }
      } else if (!t.exact.has(name)) {
        t.exact.set(name, srv);
      }
    }
  }
  // the most specific wildcard wins; sort keeps the first written among equals
  t.leading.sort((a, b) => b.suffix.length - a.suffix.length);
  t.trailing.sort((a, b) => b.prefix.length - a.prefix.length);
  t.trivial = addr.servers.length === 1 && t.regex.length === 0;
  tables.set(addr, t as NameTable<never>);
  return t;
}

/** The server for `host` (validated: lowercase, no port; '' when the request named none) on `addr`. */
export function selectServer<ServerConf extends NamedServer>(addr: NamedAddress<ServerConf>, host: string): ServerMatch<ServerConf> {
  const t = nameTable(addr);
  if (t.trivial) return { server: addr.defaultServer };
  const exact = t.exact.get(host);
  if (exact) return { server: exact };
  if (host === '') return { server: addr.defaultServer };
  for (const w of t.leading) {
    if (host.endsWith(w.suffix) && host.length > w.suffix.length) return { server: w.server };
  }
  for (const w of t.trailing) {
    if (host.startsWith(w.prefix) && host.length > w.prefix.length) return { server: w.server };
  }
  for (const re of t.regex) {
    const m = re.regex.exec(host);
    if (m) return { server: re.server, match: m, named: re.named, captures: Array.from(m, (s) => s ?? '') };
  }
  return { server: addr.defaultServer };
}

/** Names a later server of `addr` claims after an earlier one did (nginx warns and ignores them). */
export function conflictingNames<ServerConf extends NamedServer>(addr: NamedAddress<ServerConf>): string[] {
  const seen = new Map<string, ServerConf>();
  const out: string[] = [];
  for (const srv of addr.servers) {
    for (const n of srv.names) {
      if (n.regex) continue;
      // ".x" is "x" and "*.x" at once
      const keys = n.name.startsWith('.') ? [n.name.slice(1), `*${n.name}`] : [n.name];
      let conflict = false;
      for (const key of keys) {
        const owner = seen.get(key);
        if (owner !== undefined && owner !== srv) conflict = true;
        else if (owner === undefined) seen.set(key, srv);
      }
      if (conflict) out.push(n.name);
    }
  }
  return out;
}

/**
 * The arguments of `server_name` (ngx_http_core_server_name, and stream's since
 * nginx 1.25.5): exact names, wildcards and `~` regexes, added to `names`.
 * `address` names the server's first listen in nginx's wildcard error.
 */
export function readServerNameArgs<R extends VariableHost>(cf: ConfContext, args: string[], names: ServerName[], vars: VariableRegistry<R>, address: string): void {
  for (const raw of args) {
    if ((raw[0] === '*' && (raw.length < 3 || raw[1] !== '.')) || (raw[0] === '.' && raw.length < 2)) {
      throw cf.error(`server name "${raw}" is invalid`);
    }
    if (raw.startsWith('~')) {
      if (raw.length === 1) throw cf.error(`empty regex in server name "${raw}"`);
      const pattern = raw.slice(1);
      // nginx matches caselessly only a pattern that has capitals (hosts are lowercased)
      const re = compileHttpRegex(cf, vars, pattern, /[A-Z]/.test(pattern));
      names.push({ name: pattern, regex: re.regex, httpRegex: re });
      continue;
    }
    if (raw.includes('/')) cf.warn(`server name "${raw}" has suspicious symbols`);
    const name = raw.toLowerCase() === '$hostname' ? os.hostname().toLowerCase() : raw.toLowerCase();
    if (name.includes('*') && !(name.startsWith('*.') || name.endsWith('.*'))) {
      throw cf.error(`invalid server name or wildcard "${raw}" on ${address}`);
    }
    names.push({ name });
  }
}
