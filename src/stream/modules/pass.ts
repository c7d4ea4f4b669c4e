/**
 * ngx_stream_pass_module (nginx ≥ 1.25.5): `pass address` hands the
 * session's connection to another listening socket of this configuration
 * (an http or stream `listen`), as if it had been accepted there. What
 * ssl_preread read of a plain connection goes along (nginx peeks); a
 * connection whose TLS was terminated here is passed decrypted, unless the
 * preread phase already read from it (`cannot pass connection with preread
 * data`). A passed session writes no access log line.
 */
import net from 'node:net';
import { Ctx } from '../../conf/directive.ts';
import type { Directive } from '../../conf/directive.ts';
import { defineSlot } from '../../conf/context.ts';
import { unique } from '../../conf/setters.ts';
import { LogLevel } from '../../core/error-log.ts';
import type { WorkerRuntime } from '../../core/cycle.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { addressName } from '../../upstream/address.ts';
import { Status, streamConf, streamMainOf, streamServerOf } from '../conf.ts';
import type { StreamMainConf, StreamModule } from '../conf.ts';
import { parseLocalAddress } from '../listen.ts';
import type { StreamSession } from '../session.ts';

const passSrv = defineSlot<{ target?: ComplexValue<StreamSession> }>('stream_pass_srv', () => ({}));

/** The worker serving each stream block (set when the worker starts it). */
const runtimes = new WeakMap<StreamMainConf, WorkerRuntime>();

function passHandler(s: StreamSession): void {
  s.action = 'passing connection to port';
  if (s.listen.udp) {
    s.error(LogLevel.error, 'cannot pass udp connection');
    s.finalize(Status.INTERNAL_SERVER_ERROR);
    return;
  }
  if (s.tls && s.prereadData) {
    s.error(LogLevel.error, 'cannot pass connection with preread data');
    s.finalize(Status.INTERNAL_SERVER_ERROR);
    return;
  }
  const value = s.level.get(passSrv).target!;
  const text = value.constant ?? value.evaluate(s);
  const addr = parseLocalAddress(text);
  if (!addr || addr.port === undefined) {
    s.error(LogLevel.error, `${addr ? 'no port' : 'invalid host'} in pass "${text}"`);
    s.finalize(Status.INTERNAL_SERVER_ERROR);
    return;
  }
  const runtime = runtimes.get(s.main);
  const wildcard = net.isIPv6(addr.address) ? `[::]:${addr.port}` : `0.0.0.0:${addr.port}`;
  const handler = runtime?.connectionHandler(addressName(addr.address, addr.port)) ?? runtime?.connectionHandler(wildcard);
  if (!handler) {
    s.error(LogLevel.error, `port not found for "${text}"`);
    s.finalize(Status.OK);
    return;
  }
  const socket = s.socket;
  s.handOver();
  // the phases paused it; flowing starts on the next tick, after the new owner listens
  socket.resume();
  handler(socket);
}

const directives: Directive[] = [{
  name: 'pass', contexts: Ctx.STREAM_SERVER, args: 1,
  handler: unique(passSrv, 'target', (cf, node, c) => {
    const value = compileComplex(cf, streamMainOf(cf).variables, node.args[0]);
    if (value.constant !== undefined) {
      const addr = parseLocalAddress(value.constant);
      if (!addr) throw cf.error(`invalid host in "${value.constant}" of the "pass" directive`);
      if (addr.port === undefined) throw cf.error(`no port in "${value.constant}" of the "pass" directive`);
    }
    c.target = value;
    streamServerOf(cf).handler = passHandler;
  }),
}];

export const streamPassModule: StreamModule = {
  name: 'ngx_stream_pass_module',
  directives,
  initWorker(cycle, worker) {
    const stream = streamConf(cycle);
    if (stream) runtimes.set(stream, worker);
  },
};
