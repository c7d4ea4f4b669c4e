/** OCSP stapling (placeholder). */
import type { CertKeyPair } from './certificates.ts';
import type crypto from 'node:crypto';
export interface StaplingOptions { file?: string; responder?: string; verify: boolean; resolver?: string[]; resolverTimeout?: number }
export class Stapler {
  constructor(_o: StaplingOptions, _pairs: CertKeyPair[], _trusted: crypto.X509Certificate[]) {}
  stapleFor(_hello: unknown): Buffer | undefined { return undefined; }
}
