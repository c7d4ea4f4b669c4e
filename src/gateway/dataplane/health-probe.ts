/**
 * One active health probe (lua-resty-healthcheck's run_single_check): a
 * TCP connection to the target within `timeout` seconds — for `tcp` checks
 * that is the answer — then, for `http` / `https` (TLS, the certificate
 * verified unless `https_verify_certificate` is false, SNI the target's
 * `checks.active.host`, the upstream's client certificate if it has one), `GET http_path HTTP/1.0` with the Host header and
 * `req_headers`, and the status of the answer's first line. Every step
 * shares the one timeout.
 */
import type { ActiveChecks, HealthTarget } from './health.ts';
import net from 'node:net';
import tls from 'node:tls';

export type ProbeResult = { kind: 'status'; status: number } | { kind: 'connected' } | { kind: 'tcp' } | { kind: 'timeout' };

export function probe(t: HealthTarget, a: ActiveChecks, clientTls?: tls.ConnectionOptions): Promise<ProbeResult> {
  return new Promise((resolve) => {
    let done = false;
    let head = '';
    const secure = a.type === 'https';
    const servername = t.hostname && !net.isIP(t.hostname) ? t.hostname : undefined;
    const socket: net.Socket = secure
      ? tls.connect({ ...clientTls, host: t.host, port: t.port, servername, rejectUnauthorized: a.https_verify_certificate })
      : net.connect({ host: t.host, port: t.port });
    const finish = (r: ProbeResult): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(r);
    };
    const timer = setTimeout(() => finish({ kind: 'timeout' }), a.timeout * 1000);
    socket.on('error', () => finish({ kind: 'tcp' }));
    socket.on(secure ? 'secureConnect' : 'connect', () => {
      if (a.type === 'tcp') { finish({ kind: 'connected' }); return; }
      const headers = a.req_headers.map((h) => `${h}\r\n`).join('');
      socket.write(`${a.http_method} ${a.http_path} HTTP/1.0\r\nHost: ${t.hostHeader}\r\n${headers}\r\n`);
    });
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      head += chunk;
      const eol = head.indexOf('\r\n');
      if (eol < 0 && head.length < 1024) return;
      const m = /^HTTP\/\d+\.\d+\s+(\d{3})/.exec(head);
      // a status line that does not parse counts as a failed connection (bad status line)
      finish(m ? { kind: 'status', status: Number(m[1]) } : { kind: 'tcp' });
    });
    socket.on('end', () => finish({ kind: 'tcp' }));
  });
}
