/**
 * ngx_stream_ssl_preread_module: `ssl_preread on` reads the client's TLS
 * ClientHello in the preread phase without terminating TLS, for
 * `$ssl_preread_server_name` (SNI), `$ssl_preread_alpn_protocols` (ALPN,
 * comma-separated) and `$ssl_preread_protocol` (the version offered:
 * TLSv1.3 when the hello has supported_versions, SSLv2 for a version 2
 * hello). What was read stays in the socket for the content handler, so
 * `proxy_pass` sends the whole handshake on. Reading stops at a complete
 * hello, at something that is not one (the variables are then not found),
 * at `preread_buffer_size` (`preread buffer full`, `$status` 400), at the
 * client's EOF or after `preread_timeout` (the session ends).
 */
import { defineSlot, inheritUnset } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import { flagArg } from '../../conf/values.ts';
import { setting } from '../../conf/setters.ts';
import { LogLevel } from '../../core/error-log.ts';
import { DECLINED, OK, Status } from '../conf.ts';
import type { StreamModule } from '../conf.ts';
import type { StreamSession } from '../session.ts';
import { streamCoreSrv } from './core.ts';
import { chooseServer } from '../virtual-server.ts';

const prereadSrv = defineSlot<{ enabled?: boolean }, { enabled: false }>('stream_ssl_preread_srv', () => ({}), inheritUnset, { enabled: false });

/** What the ClientHello offered. */
interface Hello {
  version: [number, number];
  host: string;
  alpn: string;
}

const hellos = new WeakMap<StreamSession, Hello>();

/** Not enough bytes yet. */
const AGAIN = 'again';
/** Not a ClientHello nginx can read. */
const NOT_HELLO = 'declined';
type Parse = Hello | typeof AGAIN | typeof NOT_HELLO;

/** The handshake records at the start of `buf` (ngx_stream_ssl_preread_handler). */
function parseRecords(buf: Buffer): Parse {
  const payloads: Buffer[] = [];
  let p = 0;
  while (buf.length - p >= 5) {
    if ((buf[p] & 0x80) && buf[p + 2] === 1 && (buf[p + 3] === 0 || buf[p + 3] === 3)) {
      return { version: [buf[p + 3], buf[p + 4]], host: '', alpn: '' };
    }
    if (buf[p] !== 0x16 || buf[p + 1] !== 3) return NOT_HELLO;
    const len = buf.readUInt16BE(p + 3);
    if (buf.length - p < len + 5) break;
    payloads.push(buf.subarray(p + 5, p + 5 + len));
    p += 5 + len;
    const r = parseHello(Buffer.concat(payloads));
    if (r !== AGAIN) return r;
  }
  return AGAIN;
}

/** A ClientHello handshake message, which may continue in later records. */
function parseHello(h: Buffer): Parse {
  if (h.length < 4) return AGAIN;
  if (h[0] !== 1) return NOT_HELLO;
  const end = 4 + ((h[1] << 16) | (h[2] << 8) | h[3]);
  let pos = 4;
  const more = new Error(AGAIN);
  const bad = new Error(NOT_HELLO);
  // a field running past the message is an error; past what arrived, a wait
  const take = (n: number): Buffer => {
    if (pos + n > end) throw bad;
    if (pos + n > h.length) throw more;
    const v = h.subarray(pos, pos + n);
    pos += n;
    return v;
  };
  const u8 = () => take(1)[0];
  const u16 = () => take(2).readUInt16BE(0);
  try {
    const hello: Hello = { version: [0, 0], host: '', alpn: '' };
    const v = take(2);
    hello.version = [v[0], v[1]];
    take(32);
    take(u8());
    take(u16());
    take(u8());
    if (pos === end) return hello;
    // the extensions' total length: nginx reads extensions up to the end of the message instead
    take(2);
    let sni = false;
    let alpn = false;
    while (pos < end) {
      const type = u16();
      const size = u16();
      if (type === 0 && !sni) {
        sni = true;
        let list = u16();
        if (u8() !== 0) return NOT_HELLO;
        const len = u16();
        if (list < 3 + len) return NOT_HELLO;
        list -= 3 + len;
        hello.host = take(len).toString('latin1');
        take(list);
      } else if (type === 16 && !alpn) {
        alpn = true;
        let list = u16();
        const names: string[] = [];
        do {
          const len = u8();
          if (len === 0 || list < 1 + len) return NOT_HELLO;
          list -= 1 + len;
          names.push(take(len).toString('latin1'));
        } while (list > 0);
        hello.alpn = names.join(',');
      } else if (type === 43) {
        // supported_versions: nginx reports TLSv1.3 whatever the list holds
        hello.version = [3, 4];
        take(u8());
      } else {
        take(size);
      }
    }
    return hello;
  } catch (e) {
    if (e === more) return AGAIN;
    if (e === bad) return NOT_HELLO;
    throw e;
  }
}

/** The preread phase (ngx_stream_core_preread_phase with this module's handler). */
function prereadHandler(s: StreamSession): number | Promise<number> {
  if (!s.level.get(prereadSrv).enabled || s.listen.udp) return DECLINED;
  const core = s.level.get(streamCoreSrv);
  const socket = s.socket;
  s.action = 'prereading client data';
  return new Promise<number>((resolve) => {
    let buf: Buffer = Buffer.alloc(0);
    const finish = (rc: number) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.pause();
      // what was read goes back for the content handler (proxy_pass sends it on)
      if (buf.length) socket.unshift(buf);
      resolve(rc);
    };
    const onData = (chunk: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      s.prereadData = true;
      // as nginx's context: once bytes came, the variables are empty rather than not found, until they are no hello
      if (!hellos.has(s)) hellos.set(s, { version: [0, 0], host: '', alpn: '' });
      const r = parseRecords(buf.subarray(0, core.prereadBufferSize));
      if (r === NOT_HELLO) {
        hellos.delete(s);
        return finish(DECLINED);
      }
      if (r !== AGAIN) {
        hellos.set(s, r);
        // nginx ≥ 1.25.5: the SNI chooses the server (ngx_stream_ssl_preread_servername)
        if (r.host) chooseServer(s, r.host);
        return finish(OK);
      }
      if (buf.length >= core.prereadBufferSize) {
        s.error(LogLevel.error, 'preread buffer full');
        finish(Status.BAD_REQUEST);
      }
    };
    const onEnd = () => finish(Status.OK);
    const timer = setTimeout(() => finish(Status.OK), core.prereadTimeout);
    socket.on('data', onData);
    socket.on('end', onEnd);
    // an earlier phase (the TLS handshake) may have paused it
    socket.resume();
  });
}

/** SSL_get_version()'s names, as nginx prints them. */
function protocolName(v: [number, number]): string {
  if (v[0] === 0) return v[1] === 2 ? 'SSLv2' : '';
  if (v[0] !== 3) return '';
  return ['SSLv3', 'TLSv1', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3'][v[1]] ?? '';
}

export const streamSslPrereadModule: StreamModule = {
  name: 'ngx_stream_ssl_preread_module',
  directives: [{ name: 'ssl_preread', contexts: Ctx.STREAM | Ctx.STREAM_SERVER, args: 'flag', handler: setting(prereadSrv, 'enabled', flagArg) }],
  variables: [
    { name: 'ssl_preread_protocol', get: (s) => { const h = hellos.get(s); return h ? protocolName(h.version) : undefined; } },
    { name: 'ssl_preread_server_name', get: (s) => hellos.get(s)?.host },
    { name: 'ssl_preread_alpn_protocols', get: (s) => hellos.get(s)?.alpn },
  ],
  postconfiguration(stream) {
    stream.addPhaseHandler('PREREAD', prereadHandler);
  },
};
