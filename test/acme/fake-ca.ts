/**
 * A small fake ACME server for what Debian's pebble (2.4) predates:
 * profiles and renewal information (RFC 9773). Just enough ACME for an
 * order whose authorizations are already valid; JWS signatures are not
 * checked; the CSR is signed with openssl by a CA of its own (with an
 * authority key identifier, so certIDs can be made). Loopback only.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';

export interface FakeCa {
  url: string;
  /** Each newOrder's payload, in order. */
  orders: Array<{ identifiers: unknown; profile?: string; replaces?: string }>;
  /** The certIDs renewal information was asked for, in order. */
  renewalInfoAsked: string[];
  /** The certificates issued (PEM), by order number. */
  issued: Map<number, string>;
  stop(): Promise<void>;
}

export interface FakeCaOptions {
  profiles?: Record<string, string>;
  /** Finalize is answered only once this settles (`onFinalize` is told when one waits). */
  holdFinalize?: Promise<void>;
  onFinalize?: () => void;
  /** Offer renewal information (RFC 9773): the suggested window for a certID, and a Retry-After in seconds. */
  renewalInfo?: (id: string) => { start: Date; end: Date; retryAfter?: number };
}

export async function startFakeCa(opts: FakeCaOptions = {}): Promise<FakeCa> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-acme-fakeca-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', path.join(dir, 'ca.key'), '-out', path.join(dir, 'ca.pem'), '-days', '2', '-subj', '/CN=Fake ACME CA'], { stdio: 'ignore' });
  fs.writeFileSync(path.join(dir, 'ext.cnf'), 'authorityKeyIdentifier=keyid\n');
  const orders: FakeCa['orders'] = [];
  const renewalInfoAsked: string[] = [];
  const certs = new Map<number, string>();
  let nonce = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => { body += c.toString(); });
    req.on('end', () => {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const headers: Record<string, string> = { 'replay-nonce': `n${++nonce}`, 'content-type': 'application/json' };
      const payload = body ? JSON.parse(Buffer.from((JSON.parse(body) as { payload: string }).payload, 'base64url').toString() || 'null') as Record<string, unknown> | null : null;
      const send = (status: number, value: unknown, extra: Record<string, string> = {}) => res.writeHead(status, { ...headers, ...extra }).end(typeof value === 'string' ? value : JSON.stringify(value));
      const ari = /^\/renewal-info\/([\w-]+\.[\w-]+)$/.exec(req.url ?? '');
      if (ari && opts.renewalInfo) {
        renewalInfoAsked.push(ari[1]);
        const w = opts.renewalInfo(ari[1]);
        return send(200, { suggestedWindow: { start: w.start.toISOString(), end: w.end.toISOString() } }, w.retryAfter ? { 'retry-after': String(w.retryAfter) } : {});
      }
      const m = /^\/(\w+)(?:\/(\d+))?$/.exec(req.url ?? '') ?? [];
      const id = Number(m[2]);
      const order = (n: number) => ({
        status: certs.has(n) ? 'valid' : 'ready', identifiers: orders[n].identifiers, authorizations: [],
        finalize: `${base}/finalize/${n}`, certificate: certs.has(n) ? `${base}/cert/${n}` : undefined,
      });
      switch (m[1]) {
        case 'dir': return send(200, {
          newNonce: `${base}/nonce`, newAccount: `${base}/account`, newOrder: `${base}/neworder`, meta: { profiles: opts.profiles ?? {} },
          ...(opts.renewalInfo ? { renewalInfo: `${base}/renewal-info` } : {}),
        });
        case 'nonce': return send(200, '');
        case 'account': return send(201, { status: 'valid' }, { location: `${base}/acct/1` });
        case 'neworder':
          orders.push({ identifiers: payload!.identifiers, profile: payload!.profile as string | undefined, replaces: payload!.replaces as string | undefined });
          return send(201, order(orders.length - 1), { location: `${base}/order/${orders.length - 1}` });
        case 'order': return send(200, order(id));
        case 'finalize': {
          const finalize = () => {
            const csr = path.join(dir, `${id}.csr`);
            fs.writeFileSync(csr, Buffer.from(payload!.csr as string, 'base64url'));
            const pem = execFileSync('openssl', ['x509', '-req', '-inform', 'DER', '-in', csr, '-CA', path.join(dir, 'ca.pem'), '-CAkey', path.join(dir, 'ca.key'),
              '-days', '1', '-copy_extensions', 'copy', '-extfile', path.join(dir, 'ext.cnf'), '-set_serial', String(1000 + id)], { encoding: 'latin1' });
            certs.set(id, pem);
            send(200, order(id));
          };
          if (!opts.holdFinalize) return finalize();
          opts.onFinalize?.();
          void opts.holdFinalize.then(finalize);
          return;
        }
        case 'cert': return send(200, certs.get(id)!, { 'content-type': 'application/pem-certificate-chain' });
      }
      send(404, { type: 'urn:ietf:params:acme:error:malformed' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/dir`, orders, renewalInfoAsked, issued: certs,
    stop: async () => {
      await new Promise<void>((r) => server.close(() => r()));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

