/**
 * ngx_stream_realip_module: `set_real_ip_from` (addresses, networks,
 * host names, `unix:`). When a session came with a PROXY protocol header
 * (`listen … proxy_protocol`) from a trusted address, the header's source
 * address and port become the client's (`$remote_addr`, `$remote_port`,
 * allow/deny, limits, the error log's `client:`) from the post-accept
 * phase on; `$realip_remote_addr` and `$realip_remote_port` keep the
 * connection's own.
 */
import { defineSlot } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import { addrText, addTrustedFrom, cidrMatch, clientAddrOf, parseAddr } from '../../core/inet.ts';
import type { Rule } from '../../core/inet.ts';
import { resolveHostSync } from '../../upstream/address.ts';
import { DECLINED } from '../conf.ts';
import type { StreamModule } from '../conf.ts';
import type { StreamSession } from '../session.ts';

/** Trusted addresses; a server with its own list inherits none. */
const realipSrv = defineSlot<{ from?: Rule[] }>('stream_realip_srv', () => ({}), (parent, child) => {
  child.from ??= parent.from;
});

/** The connection's own address and port of a session whose client realip replaced. */
const original = new WeakMap<StreamSession, { addr: string; port: number }>();

function realipHandler(s: StreamSession): number {
  const from = s.level.get(realipSrv).from;
  const pp = s.proxyProtocol;
  if (!from || !pp) return DECLINED;
  if (!cidrMatch(clientAddrOf(s.remoteAddress, s.remotePort), from)) return DECLINED;
  const addr = parseAddr(pp.srcAddr);
  if (!addr) return DECLINED;
  original.set(s, { addr: s.remoteAddress, port: s.remotePort });
  s.remoteAddress = addrText(addr);
  s.remotePort = pp.srcPort;
  return DECLINED;
}

export const streamRealipModule: StreamModule = {
  name: 'ngx_stream_realip_module',
  directives: [{
    name: 'set_real_ip_from', contexts: Ctx.STREAM | Ctx.STREAM_SERVER, args: 1,
    handler(cf, node) {
      const conf = cf.get(realipSrv);
      if (!Object.hasOwn(conf, 'from') || conf.from === undefined) conf.from = [];
      addTrustedFrom(cf, node.args[0], conf.from, resolveHostSync);
    },
  }],
  variables: [
    { name: 'realip_remote_addr', get: (s) => original.get(s)?.addr ?? s.remoteAddress },
    { name: 'realip_remote_port', get: (s) => { const port = original.get(s)?.port ?? s.remotePort; return port ? String(port) : ''; } },
  ],
  postconfiguration(stream) {
    stream.addPhaseHandler('POST_ACCEPT', realipHandler);
  },
};
