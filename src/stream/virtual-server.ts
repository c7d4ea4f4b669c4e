/**
 * Choosing a session's server by name (ngx_stream_find_virtual_server,
 * nginx ≥ 1.25.5): the TLS SNI or the preread one picks among the servers
 * listening on the session's address, with the name table http uses
 * (src/core/server-names.ts); a regex name's captures become the
 * session's ($1, named groups).
 */
import { applyMatch } from '../core/regex.ts';
import { selectServer } from '../core/server-names.ts';
import type { StreamSession } from './session.ts';

/** ngx_stream_validate_host: the name lowercased without a trailing dot, or undefined when it names no server. */
function validHost(name: string): string | undefined {
  const host = name.toLowerCase().replace(/\.$/, '');
  if (!host || host.includes('..') || host.startsWith('.') || /[/\\\0\s]/.test(host)) return undefined;
  return host;
}

/** Switches `s` to the server `name` selects (the default server stays when none does). */
export function chooseServer(s: StreamSession, name: string | undefined): void {
  const addr = s.address;
  if (addr.servers.length === 1 || name === undefined) return;
  const host = validHost(name);
  if (host === undefined) return;
  const m = selectServer(addr, host);
  if (m.match) applyMatch(s, m.match, m.named);
  s.server = m.server;
  s.level = m.server.level;
}
