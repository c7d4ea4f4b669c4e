/**
 * dns-01 (RFC 8555 §8.4) through a hook command (`dns_hook`, a Gatehouse
 * addition: nginx-acme has no dns-01, its issue #11): the command is run as
 * `hook add <name> <value>` and must return once the TXT record
 * `<name> = <value>` is published (`_acme-challenge.` + the identifier, the
 * `*.` of a wildcard left out), and as `hook remove <name> <value>` once
 * the authorization is final. This is how wildcard certificates are had.
 */
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import type { Identifier } from '../identifiers.ts';
import { b64u } from '../jws.ts';
import type { Solver } from './solver.ts';

const HOOK_TIMEOUT_MS = 120_000;

export function dnsRecordName(id: Identifier): string {
  return `_acme-challenge.${id.value.replace(/^\*\./, '')}`;
}

function runHook(hook: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(hook, args, { timeout: HOOK_TIMEOUT_MS }, (err, _stdout, stderr) => {
      if (!err) return resolve();
      const why = err.killed ? `timed out after ${HOOK_TIMEOUT_MS / 1000}s` : `failed (${err.code ?? err.message})`;
      reject(new Error(`dns_hook "${hook} ${args.join(' ')}" ${why}${stderr.trim() ? `: ${stderr.trim().slice(0, 300)}` : ''}`));
    });
  });
}

/** The TXT value for a key authorization (RFC 8555 §8.4). */
export function dnsValue(keyAuthorization: string): string {
  return b64u(crypto.createHash('sha256').update(keyAuthorization).digest());
}

export function dns01Solver(hook: string): Solver {
  const value = dnsValue;
  return {
    type: 'dns-01',
    publish: (id, _token, keyAuthorization) => runHook(hook, ['add', dnsRecordName(id), value(keyAuthorization)]),
    remove: (id, _token, keyAuthorization) => runHook(hook, ['remove', dnsRecordName(id), value(keyAuthorization)]),
  };
}
