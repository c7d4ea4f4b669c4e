/**
 * http-01 (RFC 8555 §8.3): the key authorization for a token, answered by
 * every worker at `/.well-known/acme-challenge/<token>` on any plain-HTTP
 * server; kept in the shared zone so the worker that talks to the CA and
 * the one the validator reaches need not be the same.
 */
import type { SharedDocument } from '../../core/shared-document.ts';
import type { Solver } from './solver.ts';

const KIND = 'http-01';
export const HTTP01_PREFIX = '/.well-known/acme-challenge/';

export function http01Answer(doc: SharedDocument, token: string): string | undefined {
  return doc.read()[KIND]?.[token] as string | undefined;
}

export function http01Solver(doc: SharedDocument): Solver {
  return {
    type: 'http-01',
    publish(_id, token, keyAuthorization) {
      doc.update((d) => { (d[KIND] ??= {})[token] = keyAuthorization; });
    },
    remove(_id, token) {
      doc.update((d) => { if (d[KIND]) delete d[KIND][token]; });
    },
  };
}
