/** OCSP client verification (placeholder). */
import type crypto from 'node:crypto';
export interface OcspClientOptions { mode: 'on' | 'leaf'; responder?: string; cache?: { name: string; size: number }; resolver?: string[]; resolverTimeout?: number }
export class OcspVerifier {
  constructor(_o: OcspClientOptions, _trusted: crypto.X509Certificate[]) {}
}
