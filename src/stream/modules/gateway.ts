/**
 * ngx_stream_gateway_module: `gateway_stream_route` (stream server) runs
 * the gateway's stream routes on the server's sessions, as APISIX's
 * stream_preread_phase: when some route has an `sni`, the TCP client's
 * ClientHello is read first without terminating TLS (what was read goes on
 * to the upstream, TLS passes through); the route is matched with the
 * configuration version the worker holds (src/gateway/router/stream-router.ts),
 * and the server's `proxy_pass` goes to the route's upstream nodes, chosen
 * by the gateway's balancer. No route: the connection is closed.
 */
import { Ctx } from '../../conf/directive.ts';
import { Cycle } from '../../core/cycle.ts';
import { LogLevel } from '../../core/error-log.ts';
import { balancerFor } from '../../gateway/dataplane/balancer.ts';
import { GatewayStreamPicker } from '../../gateway/dataplane/stream-picker.ts';
import { matchStreamRoute, wantsSni } from '../../gateway/router/stream-router.ts';
import { cycleRuntime as gatewayRuntime } from '../../gateway/workers.ts';
import { MAX_HELLO_BYTES, readClientHello } from '../../tls/client-hello.ts';
import { DECLINED, Status, streamServerOf } from '../conf.ts';
import type { StreamModule, StreamServerConf } from '../conf.ts';
import type { StreamSession } from '../session.ts';
import { streamCoreSrv } from './core.ts';
import { sessionTargets } from './proxy.ts';

const gatewayServers = new WeakMap<StreamServerConf, Cycle>();

/** The server name of the client's ClientHello, or undefined (not TLS, no SNI, nothing within preread_timeout). */
function readSni(s: StreamSession): Promise<string | undefined> {
  const socket = s.socket;
  s.action = 'prereading client data';
  return new Promise((resolve) => {
    let buf: Buffer = Buffer.alloc(0);
    const finish = (name: string | undefined) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.pause();
      // what was read goes on to the upstream
      if (buf.length) socket.unshift(buf);
      resolve(name);
    };
    const onData = (chunk: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      const r = readClientHello(buf);
      if (r.kind === 'incomplete' && buf.length <= MAX_HELLO_BYTES) return;
      finish(r.kind === 'hello' ? r.hello.serverName?.replace(/\.$/, '').toLowerCase() : undefined);
    };
    const onEnd = () => finish(undefined);
    const timer = setTimeout(() => finish(undefined), s.level.get(streamCoreSrv).prereadTimeout);
    socket.on('data', onData);
    socket.on('end', onEnd);
  });
}

function route(s: StreamSession, cycle: Cycle, sni: string | undefined): number {
  const rt = gatewayRuntime(cycle);
  if (!rt || s.finalized) return Status.INTERNAL_SERVER_ERROR;
  const view = rt.dataPlane.current().view;
  const m = matchStreamRoute(view, { serverAddr: s.localAddress, serverPort: s.localPort, remoteAddr: s.remoteAddress, sni });
  if (!m) {
    s.error(LogLevel.info, 'not hit any route');
    return Status.OK;
  }
  if (m.missing === 'service') {
    s.error(LogLevel.error, `failed to fetch service configuration by id: ${m.conf.service_id}`);
    return 404;
  }
  if (m.missing === 'upstream_id') {
    s.error(LogLevel.error, `failed to find upstream by id: ${m.conf.upstream_id ?? ''}`);
    return Status.BAD_GATEWAY;
  }
  const u = m.upstream;
  const b = u && balancerFor(u, m.upstreamKey);
  if (!b || b.nodes.length === 0) {
    s.error(LogLevel.error, 'missing upstream configuration');
    return Status.SERVICE_UNAVAILABLE;
  }
  // chash in a stream session: the client's address (the one variable APISIX's stream routes hash on by default)
  const hashKey = u.type === 'chash' ? s.remoteAddress : '';
  sessionTargets.set(s, { picker: new GatewayStreamPicker(b, hashKey), name: m.upstreamKey });
  return DECLINED;
}

function gatewayPreread(s: StreamSession): number | Promise<number> {
  const cycle = gatewayServers.get(s.server);
  if (!cycle) return DECLINED;
  const rt = gatewayRuntime(cycle);
  if (!rt) {
    s.error(LogLevel.error, 'the gateway is not running in this worker');
    return Status.INTERNAL_SERVER_ERROR;
  }
  if (!s.listen.udp && wantsSni(rt.dataPlane.current().view)) return readSni(s).then((sni) => route(s, cycle, sni));
  return route(s, cycle, undefined);
}

export const streamGatewayModule: StreamModule = {
  name: 'ngx_stream_gateway_module',
  directives: [
    {
      name: 'gateway_stream_route', contexts: Ctx.STREAM_SERVER, args: 0,
      handler: (cf) => { gatewayServers.set(streamServerOf(cf), Cycle.of(cf)); },
    },
  ],
  postconfiguration(stream) {
    stream.addPhaseHandler('PREREAD', gatewayPreread);
  },
};
