/**
 * `gatehouse.acme` (Gatehouse's own section of config.yaml): the ACME
 * issuers that SSL objects name in `acme.issuer`, each with nginx-acme's
 * `acme_issuer` settings under the same names, and `dns_port` (the
 * built-in dns-01 responder, nginx's `acme_dns_port`). They become
 * `acme_issuer` blocks of the gateway's nginx configuration, so they are
 * read, checked and defaulted exactly as nginx-acme's (ngx_http_acme_module,
 * src/http/modules/acme/):
 *
 * ```yaml
 * gatehouse:
 *   acme:
 *     issuers:
 *       letsencrypt:
 *         uri: https://acme-v02.api.letsencrypt.org/directory
 *         contact: admin@example.com
 *         accept_terms_of_service: true
 * ```
 */
import { at, bool, ConfigError, isObj, str } from './yaml-values.ts';
import type { Obj } from './yaml-values.ts';

export interface AcmeYaml {
  /** Issuer name → its directives, each as its arguments. */
  issuers: Map<string, string[][]>;
  /** `acme_dns_port`'s argument. */
  dnsPort: string | undefined;
}

/** nginx-acme's issuer directives that take one value. */
const SINGLE = ['uri', 'account_key', 'challenge', 'preferred_chain', 'ssl_trusted_certificate', 'dns_hook'];
/** Those that are on/off. */
const FLAGS = ['common_name_in_csr', 'ssl_verify'];
const KNOWN = new Set([...SINGLE, ...FLAGS, 'contact', 'external_account_key', 'profile', 'state_path', 'accept_terms_of_service']);

function issuerDirectives(v: unknown, key: string): string[][] {
  if (!isObj(v)) throw new ConfigError(`${key}: expected a mapping of nginx-acme's issuer settings (uri, contact, ...)`);
  const out: string[][] = [];
  for (const [name, value] of Object.entries(v)) {
    const k = `${key}.${name}`;
    if (!KNOWN.has(name)) throw new ConfigError(`${k}: unknown issuer setting (expected one of ${[...KNOWN].join(', ')})`);
    if (value === undefined || value === null) continue;
    if (SINGLE.includes(name)) out.push([name, str(value, k, '')]);
    else if (FLAGS.includes(name)) out.push([name, bool(value, k, false) ? 'on' : 'off']);
    else if (name === 'accept_terms_of_service') { if (bool(value, k, false)) out.push([name]); }
    else if (name === 'state_path') out.push([name, value === false ? 'off' : str(value, k, '')]);
    else if (name === 'contact') {
      for (const [i, c] of (Array.isArray(value) ? value : [value]).entries()) out.push([name, str(c, Array.isArray(value) ? `${k}[${i + 1}]` : k, '')]);
    } else if (name === 'external_account_key') {
      if (!isObj(value) || value.kid === undefined || (value.key === undefined) === (value.file === undefined)) {
        throw new ConfigError(`${k}: expected {kid, key} (the base64url MAC key) or {kid, file}`);
      }
      const secret = value.key !== undefined ? `data:${str(value.key, `${k}.key`, '')}` : str(value.file, `${k}.file`, '');
      out.push([name, str(value.kid, `${k}.kid`, ''), secret]);
    } else if (name === 'profile') {
      if (isObj(value)) out.push([name, str(value.name, `${k}.name`, ''), ...(bool(value.require, `${k}.require`, false) ? ['require'] : [])]);
      else out.push([name, str(value, k, '')]);
    }
  }
  if (!out.some((d) => d[0] === 'uri')) throw new ConfigError(`${key}.uri: the issuer's directory URL is missing`);
  return out;
}

export function acmeOf(root: Obj): AcmeYaml | undefined {
  const raw = at(root, 'gatehouse.acme');
  if (raw === undefined || raw === null) return undefined;
  if (!isObj(raw)) throw new ConfigError('gatehouse.acme: expected a mapping with issuers');
  const issuers = new Map<string, string[][]>();
  const list = raw.issuers;
  if (list !== undefined && list !== null) {
    if (!isObj(list)) throw new ConfigError('gatehouse.acme.issuers: expected a mapping of issuer names to their settings');
    for (const [name, v] of Object.entries(list)) {
      if (!/^[A-Za-z0-9_.-]+$/.test(name)) throw new ConfigError(`gatehouse.acme.issuers.${name}: an issuer name is letters, digits, "_", "." and "-"`);
      issuers.set(name, issuerDirectives(v, `gatehouse.acme.issuers.${name}`));
    }
  }
  const dns = raw.dns_port;
  return { issuers, dnsPort: dns === undefined || dns === null ? undefined : str(dns, 'gatehouse.acme.dns_port', '') };
}

/** A value as one nginx argument (quoted, `"` and `\` escaped). */
function quote(v: string): string {
  return `"${v.replace(/[\\"]/g, '\\$&')}"`;
}

/** The http block's lines: one `acme_issuer` block per issuer, and `acme_dns_port`. */
export function acmeNginxLines(acme: AcmeYaml | undefined): string[] {
  if (!acme) return [];
  const lines: string[] = [];
  for (const [name, directives] of acme.issuers) {
    lines.push(`    acme_issuer ${name} {`, ...directives.map(([d, ...args]) => `        ${[d, ...args.map(quote)].join(' ')};`), '    }');
  }
  if (acme.dnsPort !== undefined) lines.push(`    acme_dns_port ${quote(acme.dnsPort)};`);
  if (lines.length) lines.push('');
  return lines;
}
