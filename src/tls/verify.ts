/** Client certificate verification (placeholder, filled in with the client certificate slice). */
import type { TLSSocket } from 'node:tls';
import type { ClientVerifyResult } from './connection-info.ts';
import type { ServerTls } from './server-tls.ts';
export interface Crl { issuer: string }
export function loadCrls(_path: string): Crl[] { return []; }
export async function verifyClient(_s: ServerTls, _socket: TLSSocket): Promise<ClientVerifyResult> {
  return { code: 0, reason: 'ok' };
}
export function isOptionalVerifyError(code: number): boolean { return [18, 19, 20, 2, 21].includes(code); }
