/**
 * A handshake's TLS context chosen at run time by whoever owns a server's
 * certificates (the gateway's SSL objects), and how its client is verified.
 */
import type tls from 'node:tls';
import type { ClientVerifySettings } from './verify.ts';

export interface HandshakeChoice {
  context: tls.SecureContext;
  /** Ask for a client certificate and check it with these settings. */
  verify?: ClientVerifySettings;
  /** Refuse the handshake without a valid client certificate (else it is checked per request). */
  requireClient?: boolean;
}
