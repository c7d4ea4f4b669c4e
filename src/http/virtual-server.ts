/**
 * Choosing the virtual server for a request (ngx_http_find_virtual_server):
 * exact name, longest leading wildcard (`*.example.com`), longest trailing
 * wildcard (`www.example.*`), then regexes in order; otherwise the address's
 * default server.
 */
import type { AddressConf, ServerConf } from './http-conf.ts';

interface NameTable {
  exact: Map<string, ServerConf>;
  leading: Array<{ suffix: string; server: ServerConf }>;
  trailing: Array<{ prefix: string; server: ServerConf }>;
  regex: Array<{ regex: RegExp; server: ServerConf }>;
}

const tables = new WeakMap<AddressConf, NameTable>();

function tableOf(addr: AddressConf): NameTable {
  let t = tables.get(addr);
  if (t) return t;
  t = { exact: new Map(), leading: [], trailing: [], regex: [] };
  for (const srv of addr.servers) {
    for (const n of srv.names) {
      if (n.regex) { t.regex.push({ regex: n.regex, server: srv }); continue; }
      const name = n.name;
      if (name.startsWith('.')) {
        if (!t.exact.has(name.slice(1))) t.exact.set(name.slice(1), srv);
        t.leading.push({ suffix: name, server: srv });
      } else if (name.startsWith('*.')) {
        t.leading.push({ suffix: name.slice(1), server: srv });
      } else if (name.endsWith('.*')) {
        t.trailing.push({ prefix: name.slice(0, -1), server: srv });
      } else if (!t.exact.has(name)) {
        t.exact.set(name, srv);
      }
    }
  }
  // longest wildcard wins; keep the first written among equals
  t.leading.sort((a, b) => b.suffix.length - a.suffix.length);
  t.trailing.sort((a, b) => b.prefix.length - a.prefix.length);
  tables.set(addr, t);
  return t;
}

export interface ServerMatch {
  server: ServerConf;
  captures?: string[];
  groups?: Record<string, string | undefined>;
}

/** The server for `host` (lowercase, no port) on `addr`. */
export function selectServer(addr: AddressConf, host: string): ServerMatch {
  if (addr.servers.length === 1 && addr.servers[0].names.length === 1 && !addr.servers[0].names[0].regex) {
    return { server: addr.defaultServer };
  }
  const t = tableOf(addr);
  const exact = t.exact.get(host);
  if (exact) return { server: exact };
  if (host) {
    for (const w of t.leading) {
      if (host.endsWith(w.suffix) && host.length > w.suffix.length) return { server: w.server };
    }
    for (const w of t.trailing) {
      if (host.startsWith(w.prefix) && host.length > w.prefix.length) return { server: w.server };
    }
  }
  for (const re of t.regex) {
    const m = re.regex.exec(host);
    if (m) return { server: re.server, captures: Array.from(m, (s) => s ?? ''), groups: m.groups };
  }
  return { server: addr.defaultServer };
}
