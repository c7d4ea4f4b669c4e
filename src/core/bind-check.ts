/**
 * Test-binds listening addresses before workers bind them with SO_REUSEPORT.
 * Two sockets that both set SO_REUSEPORT share a port silently, so a port
 * held by another program that also uses it would split our traffic with
 * it. Binding once without SO_REUSEPORT fails on any port in use, which
 * gives nginx's `bind() to ADDR failed (98: Address already in use)`.
 * Like nginx, a busy address is tried 5 times, half a second apart (an old
 * server may be about to release it), before giving up.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import type { ListenSpec } from './cycle.ts';
import type { ErrorLog } from './error-log.ts';
import { sysErrorText } from '../conf/errors.ts';

/** A bind check failed; every line about it is already in the error log. */
export class BindFailed extends Error {}

const TRIES = 5;
const RETRY_DELAY_MS = 500;

function bindOnce(spec: ListenSpec): Promise<NodeJS.ErrnoException | undefined> {
  if (spec.udp) {
    return new Promise((resolve) => {
      const socket = dgram.createSocket({ type: spec.host!.includes(':') ? 'udp6' : 'udp4', ipv6Only: spec.ipv6only });
      socket.once('error', (e: NodeJS.ErrnoException) => { socket.close(); resolve(e); });
      socket.bind({ address: spec.host, port: spec.port, exclusive: true }, () => socket.close(() => resolve(undefined)));
    });
  }
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', (e: NodeJS.ErrnoException) => resolve(e));
    // no reusePort: fails on a port any other socket listens on
    server.listen({ host: spec.host, port: spec.port, backlog: 1, exclusive: true, ipv6Only: spec.ipv6only ?? spec.host?.includes(':') }, () => {
      server.close(() => resolve(undefined));
    });
  });
}

/** TCP and UDP addresses only: unix sockets are unlinked and rebound by worker 0. */
function needsCheck(spec: ListenSpec): boolean {
  return spec.path === undefined && spec.port !== undefined;
}

/**
 * Checks that every address in `specs` can be bound; logs each failure as
 * nginx does (`[emerg]`) and throws BindFailed after the last try.
 * `skip(spec)` leaves out addresses our own workers already hold a socket
 * on the same port for (a reload), which a plain bind would report as busy.
 */
export async function checkBindable(specs: Iterable<ListenSpec>, log: ErrorLog, skip?: (spec: ListenSpec) => boolean): Promise<void> {
  let pending = [...specs].filter((s) => needsCheck(s) && !skip?.(s));
  for (let attempt = 1; pending.length > 0; attempt++) {
    const failed: ListenSpec[] = [];
    for (const spec of pending) {
      const err = await bindOnce(spec);
      if (!err) continue;
      log.emerg(`bind() to ${spec.key} failed ${sysErrorText(err)}`);
      // only a busy address is worth waiting for; anything else (EACCES, EADDRNOTAVAIL) is final
      if (err.code !== 'EADDRINUSE') throw new BindFailed(`bind() to ${spec.key} failed ${sysErrorText(err)}`);
      failed.push(spec);
    }
    if (failed.length === 0) return;
    if (attempt === TRIES) {
      log.emerg('still could not bind()');
      throw new BindFailed('still could not bind()');
    }
    pending = failed;
    await new Promise((r) => setTimeout(r, RETRY_DELAY_MS));
  }
}
