/**
 * The `acme_issuer name { … }` block of ngx_http_acme_module, read as
 * nginx-acme reads it (its src/conf.rs issuer commands): each directive
 * once, nginx-acme's messages, the defaults of Issuer::init.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import type { ConfContext } from '../../../conf/context.ts';
import type { ConfNode } from '../../../conf/parser.ts';
import { flagArg } from '../../../conf/values.ts';
import type { KeySpec } from '../../../acme/jws.ts';
import type { IssuerConf } from '../../../acme/state.ts';

/** `ecdsa[:256|384|521]`, `rsa[:2048|3072|4096]`, else a file (nginx-acme's PrivateKey). */
export function keySpec(value: string): KeySpec | string {
  const [kind, size] = value.includes(':') ? [value.slice(0, value.indexOf(':')), value.slice(value.indexOf(':') + 1)] : [value, undefined];
  if (kind === 'ecdsa') {
    const bits = size === undefined ? 256 : Number(size);
    return bits === 256 || bits === 384 || bits === 521 ? { type: 'ecdsa', bits } : 'unsupported curve';
  }
  if (kind === 'rsa') {
    const bits = size === undefined ? 2048 : Number(size);
    return bits === 2048 || bits === 3072 || bits === 4096 ? { type: 'rsa', bits } : 'unsupported key size';
  }
  return { type: 'file', path: value };
}

type IssuerDraft = Partial<IssuerConf> & { name: string; contacts: string[]; statePathSet?: boolean };

const ISSUER_ARGS: Record<string, number | [number, number]> = {
  uri: 1, account_key: 1, challenge: 1, common_name_in_csr: 1, contact: 1, external_account_key: 2,
  preferred_chain: 1, profile: [1, 2], ssl_trusted_certificate: 1, ssl_verify: 1, state_path: 1, accept_terms_of_service: 0,
  dns_hook: 1,
};

/** One directive inside `acme_issuer { }`; a string is nginx-acme's `"name" directive <string>`. */
function issuerDirective(cf: ConfContext, d: IssuerDraft, node: ConfNode, seen: Set<string>): string | undefined {
  const [a, b] = node.args;
  const once = (field: string) => {
    if (seen.has(field)) return 'is duplicate';
    seen.add(field);
    return undefined;
  };
  switch (node.name) {
    case 'uri': {
      let u: URL;
      try { u = new URL(a); } catch { return 'invalid value'; }
      d.uri = u.href;
      return undefined;
    }
    case 'account_key': {
      const dup = once('account_key');
      if (dup) return dup;
      const spec = keySpec(a);
      if (typeof spec === 'string') throw cf.error(`account_key: ${spec}`);
      d.accountKey = spec.type === 'file' ? { type: 'file', path: cf.confPath(spec.path) } : spec;
      return undefined;
    }
    case 'challenge': {
      const dup = once('challenge');
      if (dup) return dup;
      if (a === 'http' || a === 'http-01') d.challenge = 'http-01';
      else if (a === 'tls-alpn' || a === 'tls-alpn-01') d.challenge = 'tls-alpn-01';
      else if (a === 'dns' || a === 'dns-01') d.challenge = 'dns-01';
      else throw cf.error(`unsupported challenge: ${a}`);
      return undefined;
    }
    case 'common_name_in_csr': return once('common_name_in_csr') ?? void (d.commonNameInCsr = flagArg(cf, a));
    case 'contact':
      if (!a) return 'invalid value';
      d.contacts.push(/^[a-z][a-z0-9+.-]*:/i.test(a) ? a : `mailto:${a}`);
      return undefined;
    case 'external_account_key': {
      const dup = once('external_account_key');
      if (dup) return dup;
      if (!a || !b) return 'invalid value';
      let encoded: string;
      try {
        encoded = b.startsWith('data:') ? b.slice(5) : fs.readFileSync(cf.confPath(b), 'latin1');
      } catch (err) {
        throw cf.error(`external_account_key: ${(err as Error).message}`);
      }
      encoded = encoded.trim();
      if (!/^[A-Za-z0-9_-]+={0,2}$/.test(encoded)) return 'invalid base64url encoded value';
      d.eab = { kid: a, key: Buffer.from(encoded, 'base64url') };
      return undefined;
    }
    case 'preferred_chain': return once('preferred_chain') ?? void (d.preferredChain = a);
    case 'profile': {
      const dup = once('profile');
      if (dup) return dup;
      if (b !== undefined && b !== 'require') return 'invalid value';
      d.profile = { name: a, require: b === 'require' };
      return undefined;
    }
    case 'ssl_trusted_certificate': return once('ssl_trusted_certificate') ?? void (d.trustedCertificate = cf.confPath(a));
    case 'ssl_verify': return once('ssl_verify') ?? void (d.verify = flagArg(cf, a));
    case 'state_path': {
      const dup = once('state_path');
      if (dup) return dup;
      d.statePathSet = true;
      d.statePath = a === 'off' ? undefined : cf.prefixPath(a);
      return undefined;
    }
    case 'accept_terms_of_service': return once('accept_terms_of_service') ?? void (d.acceptTos = true);
    case 'dns_hook': return once('dns_hook') ?? void (d.dnsHook = cf.confPath(a));
  }
  return undefined;
}

/** Reads an `acme_issuer name { … }` block (nginx-acme's cmd_add_issuer and Issuer::init), with its errors. */
export function readIssuer(cf: ConfContext, node: ConfNode): IssuerConf {
  const name = node.args[0];
  const d: IssuerDraft = { name, contacts: [] };
  const seen = new Set<string>();
  const outer = cf.node;
  for (const child of node.children ?? []) {
    cf.node = child;
    const want = ISSUER_ARGS[child.name];
    if (want === undefined) throw cf.error(`unknown directive "${child.name}"`);
    const n = child.args.length;
    if (typeof want === 'number' ? n !== want : n < want[0] || n > want[1]) throw cf.error(`invalid number of arguments in "${child.name}"`);
    const err = issuerDirective(cf, d, child, seen);
    if (err) throw cf.error(`"${child.name}" directive ${err}`);
  }
  cf.node = outer;
  cf.bodyRead = true;
  if (!d.uri || !new URL(d.uri).host) throw cf.error('acme_issuer: "uri" is missing');
  const issuer: IssuerConf = {
    name, uri: d.uri, accountKey: d.accountKey ?? { type: 'ecdsa', bits: 256 }, challenge: d.challenge ?? 'http-01',
    contacts: d.contacts, commonNameInCsr: d.commonNameInCsr ?? false, eab: d.eab, preferredChain: d.preferredChain, profile: d.profile,
    trustedCertificate: d.trustedCertificate, verify: d.verify ?? true, dnsHook: d.dnsHook,
    statePath: d.statePathSet ? d.statePath : cf.prefixPath(`acme_${name}`), acceptTos: d.acceptTos ?? false,
  };
  if (issuer.accountKey.type === 'file') {
    try {
      crypto.createPrivateKey(fs.readFileSync(issuer.accountKey.path, 'latin1'));
    } catch (err) {
      throw cf.error(`acme_issuer: cannot load account key: ${(err as Error).message}`);
    }
  }
  if (issuer.trustedCertificate && !fs.existsSync(issuer.trustedCertificate)) throw cf.error('acme_issuer: trusted ceritificate configuration failed');
  return issuer;
}
