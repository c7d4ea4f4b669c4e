/**
 * ngx_stream_gateway_module: `gateway_stream_route` (stream server) runs
 * the gateway's stream routes on the server's sessions, as APISIX's
 * stream_preread_phase: when some route has an `sni`, the TCP client's
 * ClientHello is read first without terminating TLS (what was read goes on
 * to the upstream, TLS passes through); the route is matched with the
 * configuration version the worker holds (src/gateway/router/stream-router.ts),
 * and the server's `proxy_pass` goes to the route's upstream nodes, chosen
 * by the gateway's balancer. No route: the connection is closed.
 * `gateway_stream_route tls` (stream_proxy's `tls: true` ports) first
 * terminates TLS with the SSL object of the ClientHello's name (as the
 * HTTP TLS port does; a client certificate, when the object asks for one,
 * is required in the handshake) and matches the routes with that name.
 */
import { Ctx } from '../../conf/directive.ts';
import { Cycle } from '../../core/cycle.ts';
import { LogLevel } from '../../core/error-log.ts';
import { balancerFor } from '../../gateway/dataplane/balancer.ts';
import { GatewayStreamPicker } from '../../gateway/dataplane/stream-picker.ts';
import { matchStreamRoute, wantsSni } from '../../gateway/router/stream-router.ts';
import { cycleRuntime as gatewayRuntime } from '../../gateway/workers.ts';
import tls from 'node:tls';
import { chooseCertificate } from '../../gateway/dataplane/certificates.ts';
import type { GatewayRuntime } from '../../gateway/runtime.ts';
import { MAX_HELLO_BYTES, readClientHello } from '../../tls/client-hello.ts';
import { verifyClient } from '../../tls/verify.ts';
import { DECLINED, Status, streamServerOf } from '../conf.ts';
import type { StreamModule, StreamServerConf } from '../conf.ts';
import type { StreamSession } from '../session.ts';
import { streamCoreSrv } from './core.ts';
import { sessionTargets } from './proxy.ts';

const gatewayServers = new WeakMap<StreamServerConf, { cycle: Cycle; tls: boolean }>();

/** The server name of the client's ClientHello as sent, or undefined (not TLS, no SNI, nothing within preread_timeout). */
function readServerName(s: StreamSession): Promise<string | undefined> {
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
      finish(r.kind === 'hello' ? r.hello.serverName : undefined);
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
  // the upstream's timeout: connect for the connection, read for the session's idle time (proxy_timeout)
  const t = u.timeout;
  sessionTargets.set(s, {
    picker: new GatewayStreamPicker(b, hashKey), name: m.upstreamKey,
    connectTimeout: t ? t.connect * 1000 : undefined, timeout: t ? t.read * 1000 : undefined,
  });
  return DECLINED;
}

/** Terminates TLS on the session's socket with the SSL object of `sni`; the name routes matched with, or a status to end with. */
async function terminateTls(s: StreamSession, rt: GatewayRuntime, sni: string | undefined): Promise<{ sni: string | undefined } | number> {
  const ssl = rt.config.ssl;
  const settings = { fallbackSni: ssl?.fallbackSni, protocols: ssl?.protocols ?? ['TLSv1.2', 'TLSv1.3'] };
  const choice = chooseCertificate(rt.dataPlane.current().view, settings, s, sni);
  if (typeof choice === 'string') {
    s.error(LogLevel.error, choice);
    return Status.OK;
  }
  s.action = 'SSL handshaking';
  const raw = s.socket;
  const secure = new tls.TLSSocket(raw, {
    isServer: true, secureContext: choice.context, requestCert: choice.verify !== undefined, rejectUnauthorized: choice.verify !== undefined,
  });
  secure.allowHalfOpen = true;
  const ok = await new Promise<boolean>((resolve) => {
    secure.once('secure', () => resolve(true));
    secure.once('error', (err) => {
      s.error(LogLevel.info, `SSL_do_handshake() failed (SSL: ${err.message})`);
      resolve(false);
    });
    secure.once('close', () => resolve(false));
  });
  if (!ok || s.finalized) return Status.OK;
  // the stream subsystem verifies in the handshake (APISIX's reject_in_handshake), skip_mtls_uri_regex or not
  if (choice.verify) {
    const v = await verifyClient(choice.verify, secure).catch(() => undefined);
    if (!v || v.code !== 0) {
      s.error(LogLevel.info, `client SSL certificate verify error: (${v?.code ?? 1}:${v?.reason ?? 'unspecified'})`);
      return Status.OK;
    }
  }
  secure.on('error', (err: NodeJS.ErrnoException) => { if (!s.finalized) s.onClientError(err); });
  s.socket = secure;
  return { sni: sni === undefined ? settings.fallbackSni : sni.replace(/\.$/, '').toLowerCase() };
}

function gatewayPreread(s: StreamSession): number | Promise<number> {
  const server = gatewayServers.get(s.server);
  if (!server) return DECLINED;
  const { cycle } = server;
  const rt = gatewayRuntime(cycle);
  if (!rt) {
    s.error(LogLevel.error, 'the gateway is not running in this worker');
    return Status.INTERNAL_SERVER_ERROR;
  }
  if (server.tls) {
    return readServerName(s).then((name) => terminateTls(s, rt, name)).then((r) => (typeof r === 'number' ? r : route(s, cycle, r.sni)));
  }
  if (!s.listen.udp && wantsSni(rt.dataPlane.current().view)) {
    return readServerName(s).then((name) => route(s, cycle, name?.replace(/\.$/, '').toLowerCase()));
  }
  return route(s, cycle, undefined);
}

export const streamGatewayModule: StreamModule = {
  name: 'ngx_stream_gateway_module',
  directives: [
    {
      name: 'gateway_stream_route', contexts: Ctx.STREAM_SERVER, args: [0, 1],
      handler: (cf, node) => {
        if (node.args.length && node.args[0] !== 'tls') return `invalid parameter "${node.args[0]}"`;
        gatewayServers.set(streamServerOf(cf), { cycle: Cycle.of(cf), tls: node.args[0] === 'tls' });
      },
    },
  ],
  postconfiguration(stream) {
    stream.addPhaseHandler('PREREAD', gatewayPreread);
  },
};
