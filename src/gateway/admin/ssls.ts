/** /ssls (apisix/admin/ssl.lua): private keys are never returned by GET. */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { sslSchema } from '../schema/resources.ts';
import { isSecretRef as isRef } from '../schema/validate.ts';
import type { Keyring } from '../data-encryption.ts';
import { defineResource } from './resource.ts';

/**
 * `$secret://` and `$env://` references are resolved when the certificate is
 * served (dataplane/certificates.ts), not parsed here: as check_ssl_conf, a
 * pair is not checked when either its cert or its key is a reference.
 */
function pairError(cert: unknown, key: unknown, keyring: Keyring | undefined): string | undefined {
  if (isRef(cert) || isRef(key)) return undefined;
  return certError(cert) ?? keyError(key, keyring);
}

function certError(cert: unknown): string | undefined {
  if (isRef(cert)) return undefined;
  // APISIX names the OpenSSL call that failed (ngx.ssl's parse_pem_cert), not OpenSSL's reason
  try { new X509Certificate(cert as string); return undefined; } catch { return 'failed to parse cert: PEM_read_bio_X509_AUX() failed'; }
}

/** A stored key is encrypted (PATCH merges into the stored value): checked decrypted, as APISIX's aes_decrypt_pkey does. */
function keyError(key: unknown, keyring: Keyring | undefined): string | undefined {
  if (isRef(key)) return undefined;
  const pem = typeof key === 'string' && !key.startsWith('---') && keyring ? keyring.decrypt(key) ?? key : key;
  try { createPrivateKey(pem as string); return undefined; } catch { return 'failed to parse key: PEM_read_bio_PrivateKey() failed'; }
}

export const ssls = defineResource({
  name: 'ssls', kind: 'ssl', schema: sslSchema,
  hidden: ['key', 'keys'],
  // a PEM key (plain text starts with `---`) is stored encrypted; an already encrypted one is left alone
  encrypt(conf, keyring) {
    const seal = (k: unknown): unknown => (typeof k === 'string' && k.startsWith('---') ? keyring.encrypt(k) : k);
    if (conf.key !== undefined) conf.key = seal(conf.key);
    if (Array.isArray(conf.keys)) conf.keys = conf.keys.map(seal);
  },
  // PATCH merges into the plain keys and checks them again
  decrypt(conf, keyring) {
    const open = (k: unknown): unknown => (typeof k === 'string' && !k.startsWith('---') && !isRef(k) ? keyring.decrypt(k) ?? k : k);
    if (conf.key !== undefined) conf.key = open(conf.key);
    if (Array.isArray(conf.keys)) conf.keys = conf.keys.map(open);
  },
  check(conf, ctx) {
    const acme = conf.acme as { issuer: string; fallback?: string[] } | undefined;
    if (acme) {
      if (conf.type === 'client') return 'acme: only server certificates are ordered from an issuer';
      const known = ctx.settings.acmeIssuers ?? [];
      const unknown = [acme.issuer, ...(acme.fallback ?? [])].find((name) => !known.includes(name));
      if (unknown !== undefined) return `acme: unknown issuer "${unknown}" (config.yaml's gatehouse.acme.issuers has ${known.length ? known.map((k) => `"${k}"`).join(', ') : 'none'})`;
      // a GET sent back (the certificate without its key): the gateway writes the issued pair in again
      if (conf.key === undefined) delete conf.cert;
    }
    if (conf.cert !== undefined) {
      const err = pairError(conf.cert, conf.key, ctx.keyring);
      if (err) return err;
    }
    const certs = (conf.certs as unknown[] | undefined) ?? [];
    const keys = (conf.keys as unknown[] | undefined) ?? [];
    if (certs.length !== keys.length) return 'mismatched number of certs and keys';
    for (let i = 0; i < certs.length; i++) {
      const err = pairError(certs[i], keys[i], ctx.keyring);
      if (err) return `failed to handle cert-key pair[${i + 1}]: ${err}`;
    }
    const client = conf.client as { ca?: unknown } | undefined;
    if (client?.ca !== undefined) {
      const err = certError(client.ca);
      if (err) return `failed to validate client_cert: ${err}`;
    }
    return undefined;
  },
});
