/**
 * tls-alpn-01 (RFC 8737): a self-signed certificate for the name with the
 * SHA-256 of the key authorization in a critical acmeIdentifier extension,
 * served by every worker to a handshake that offers only `acme-tls/1`
 * (src/tls/certificate-registry.ts, src/http/modules/ssl/handshake.ts).
 */
import crypto from 'node:crypto';
import { setAlpnChallenge } from '../../tls/certificate-registry.ts';
import { createSelfSigned } from '../../tls/x509-builder.ts';
import type { Solver } from './solver.ts';

export function tlsAlpn01Solver(): Solver {
  return {
    type: 'tls-alpn-01',
    publish(id, _token, keyAuthorization) {
      const key = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey;
      const digest = crypto.createHash('sha256').update(keyAuthorization).digest();
      const certPem = createSelfSigned(key, { names: [id.value], acmeIdentifier: digest });
      setAlpnChallenge(id.value, { certPem, keyPem: key.export({ type: 'pkcs8', format: 'pem' }) as string });
    },
    remove(id) {
      setAlpnChallenge(id.value, undefined);
    },
  };
}
