/**
 * tls-alpn-01 (RFC 8737): a self-signed certificate for the name with the
 * SHA-256 of the key authorization in a critical acmeIdentifier extension,
 * served by every worker to a handshake that offers only `acme-tls/1`
 * for that name (an IP's reverse name, RFC 8738)
 * (src/tls/certificate-registry.ts, src/http/modules/ssl/handshake.ts).
 */
import crypto from 'node:crypto';
import { setAlpnChallenge } from '../../tls/certificate-registry.ts';
import { addressBytes } from '../../core/inet.ts';
import { createSelfSigned } from '../../tls/x509-builder.ts';
import type { Identifier } from '../identifiers.ts';
import type { Solver } from './solver.ts';

/** The name the validator sends: the DNS name, or for an IP its reverse name (RFC 8738 §6). */
function sniOf(id: Identifier): string {
  if (id.type !== 'ip') return id.value;
  if (!id.value.includes(':')) return `${id.value.split('.').reverse().join('.')}.in-addr.arpa`;
  const hex = Buffer.from(addressBytes(id.value)!).toString('hex');
  return `${[...hex].reverse().join('.')}.ip6.arpa`;
}

export function tlsAlpn01Solver(): Solver {
  return {
    type: 'tls-alpn-01',
    publish(id, _token, keyAuthorization) {
      const key = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey;
      const digest = crypto.createHash('sha256').update(keyAuthorization).digest();
      const certPem = createSelfSigned(key, { names: [id.value], acmeIdentifier: digest });
      setAlpnChallenge(sniOf(id), { certPem, keyPem: key.export({ type: 'pkcs8', format: 'pem' }) as string });
    },
    remove(id) {
      setAlpnChallenge(sniOf(id), undefined);
    },
  };
}
