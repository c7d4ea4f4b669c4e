/** What an order asks of a challenge type: publish the answer before it is validated, remove it once the authorization is final. */
import type { Identifier } from '../identifiers.ts';

export interface Solver {
  type: 'http-01' | 'tls-alpn-01' | 'dns-01';
  /** Resolves once the answer can be validated (dns-01: once the hook has published the record). */
  publish(identifier: Identifier, token: string, keyAuthorization: string): void | Promise<void>;
  remove(identifier: Identifier, token: string, keyAuthorization: string): void | Promise<void>;
}
