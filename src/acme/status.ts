/**
 * What each certificate is, when it renews and its last error: written by
 * the worker that talks to the CA into the shared zone, read by any worker
 * for `acme_status` (and logged as it changes, by the manager).
 */
import type { SharedDocument } from '../core/shared-document.ts';

const KIND = 'status';

export interface CertificateStatus {
  issuer: string;
  identifiers: string[];
  /** `pending` (no certificate yet), `valid`, or `failing` (the last attempt failed). */
  state: 'pending' | 'valid' | 'failing';
  notBefore?: string;
  notAfter?: string;
  renewAt?: string;
  nextAttempt?: string;
  lastError?: string;
  lastErrorAt?: string;
}

export function setCertificateStatus(doc: SharedDocument, id: string, status: CertificateStatus): void {
  doc.update((d) => { (d[KIND] ??= {})[id] = status; });
}

export function certificateStatuses(doc: SharedDocument): Record<string, CertificateStatus> {
  return (doc.read()[KIND] ?? {}) as Record<string, CertificateStatus>;
}
