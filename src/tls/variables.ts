/**
 * The $ssl_* variables both ssl modules define ($ssl_protocol, $ssl_cipher,
 * ..., $ssl_client_*), for a request or a stream session: each module says
 * where its connection's TLS is. Empty on plain connections, as in nginx.
 */
import crypto from 'node:crypto';
import type { VariableDef, VariableHost, VarValue } from '../core/variables.ts';
import type { TlsConnection } from './connection-info.ts';
import { cipherName, groupCode, groupName } from './cipher-names.ts';
import { isGrease } from './client-hello.ts';
import { sessionIdOf } from './der.ts';
import { certificateNames, dnOneline, dnRfc2253 } from './dn.ts';

function peer(t: TlsConnection | undefined): crypto.X509Certificate | undefined {
  return t?.peerCertificate;
}

function pem(cert: crypto.X509Certificate): string {
  return cert.toString();
}

/** ngx_escape_uri(NGX_ESCAPE_URI_COMPONENT) of the PEM. */
function escapeComponent(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const plain = (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || '-._~'.includes(s[i]);
    out += plain ? s[i] : '%' + c.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}

/** OpenSSL's default groups in its preference order (OpenSSL 3.5), when `ssl_ecdh_curve` is `auto`. */
const DEFAULT_GROUPS = [0x11ec, 29, 23, 30, 24, 25, 256, 257];

/**
 * `$ssl_curve`: Node does not expose the negotiated group on the server
 * side, so it is worked out from the ClientHello and the configured groups
 * the way OpenSSL picks: the client's key share when the server accepts it
 * (TLS 1.3), else the first group both support.
 */
function negotiatedGroup(t: TlsConnection): VarValue {
  const hello = t.hello;
  if (!hello) return '';
  const tls13 = t.protocol === 'TLSv1.3';
  if (!tls13 && !/^ECDHE/.test(t.cipher)) return '';
  const conf = t.settings.conf.ecdhCurve;
  const server = conf === 'auto' ? DEFAULT_GROUPS : conf.split(':').map(groupCode).filter((g): g is number => g !== undefined);
  const client = hello.groups.filter((g) => !isGrease(g));
  if (tls13) {
    const share = hello.keyShares.find((g) => server.includes(g) && !isGrease(g));
    if (share !== undefined) return groupName(share);
  }
  const order = t.settings.conf.preferServerCiphers ? server.filter((g) => client.includes(g)) : client.filter((g) => server.includes(g));
  return order.length ? groupName(order[0]) : '';
}

/** Where a host's TLS is: the finished handshake, or the SNI of one still running (certificates named by `$ssl_server_name`). */
export interface TlsOf<H> {
  tls(h: H): TlsConnection | undefined;
  handshakeServerName(h: H): string | undefined;
}

function days(validTo: string): string {
  const end = Date.parse(validTo);
  return String(Math.max(0, Math.floor((end - Date.now()) / 86_400_000)));
}

export function tlsVariables<H extends VariableHost>(of: TlsOf<H>): Array<VariableDef<H>> {
  const tlsVar = (name: string, get: (t: TlsConnection) => VarValue): VariableDef<H> => ({
    name,
    get: (h) => {
      const t = of.tls(h);
      return t ? get(t) : '';
    },
  });
  const certVar = (name: string, get: (c: crypto.X509Certificate) => VarValue): VariableDef<H> => tlsVar(name, (t) => {
    const c = peer(t);
    return c ? get(c) : '';
  });
  return [
    tlsVar('ssl_protocol', (t) => t.protocol),
    tlsVar('ssl_cipher', (t) => t.cipher),
    tlsVar('ssl_ciphers', (t) => (t.hello ? t.hello.ciphers.map(cipherName).join(':') : '')),
    tlsVar('ssl_curve', negotiatedGroup),
    tlsVar('ssl_curves', (t) => (t.hello ? t.hello.groups.map(groupName).join(':') : '')),
    tlsVar('ssl_session_id', (t) => {
      const s = t.socket.getSession();
      return s ? (sessionIdOf(s)?.toString('hex') ?? '') : '';
    }),
    tlsVar('ssl_session_reused', (t) => (t.reused ? 'r' : '.')),
    { name: 'ssl_early_data', noCache: true, get: () => '' },
    {
      name: 'ssl_server_name',
      get: (h) => {
        const t = of.tls(h);
        return (t ? t.serverName : of.handshakeServerName(h)) ?? '';
      },
    },
    tlsVar('ssl_alpn_protocol', (t) => t.socket.alpnProtocol || ''),
    certVar('ssl_client_cert', (c) => {
      const text = pem(c);
      return text.slice(0, -1).replace(/\n/g, '\n\t');
    }),
    certVar('ssl_client_raw_cert', (c) => pem(c)),
    certVar('ssl_client_escaped_cert', (c) => escapeComponent(pem(c))),
    certVar('ssl_client_s_dn', (c) => dnRfc2253(certificateNames(c.raw).subject)),
    certVar('ssl_client_i_dn', (c) => dnRfc2253(certificateNames(c.raw).issuer)),
    certVar('ssl_client_s_dn_legacy', (c) => dnOneline(certificateNames(c.raw).subject)),
    certVar('ssl_client_i_dn_legacy', (c) => dnOneline(certificateNames(c.raw).issuer)),
    certVar('ssl_client_serial', (c) => c.serialNumber.toUpperCase()),
    certVar('ssl_client_fingerprint', (c) => crypto.createHash('sha1').update(c.raw).digest('hex')),
    certVar('ssl_client_v_start', (c) => c.validFrom),
    certVar('ssl_client_v_end', (c) => c.validTo),
    certVar('ssl_client_v_remain', (c) => days(c.validTo)),
    tlsVar('ssl_client_verify', (t) => {
      if (!peer(t)) return 'NONE';
      const v = t.verify;
      if (!v || v.code === 0 && !v.ocspFailed) return 'SUCCESS';
      return `FAILED:${v.reason}`;
    }),
  ];
}
