/**
 * ACME identifiers (RFC 8555 §7.1.4, RFC 8738) as nginx-acme reads them
 * from `acme_certificate` and `server_name`: an IP address, or a DNS name
 * checked by its rules and lowercased; `.example.com` stands for it and
 * `www.example.com`.
 */

export interface Identifier { type: 'dns' | 'ip'; value: string }

const IP = /^[\d.]+$|:/;

export function identifierOf(name: string): Identifier {
  return { type: IP.test(name) ? 'ip' : 'dns', value: name };
}

/** Adds `value`'s names to `names`; returns nginx-acme's words for an invalid one. */
export function addIdentifier(names: string[], value: string): string | undefined {
  const err = dnsIdentifierError(value);
  if (err && !IP.test(value)) return err;
  const v = value.toLowerCase();
  const add = (n: string) => { if (!names.includes(n)) names.push(n); };
  if (v.startsWith('.')) {
    add(`www${v}`);
    add(v.slice(1));
  } else add(v);
  return undefined;
}

/**
 * nginx-acme's check of a DNS identifier (its validate_dns_identifier):
 * printable ASCII that nginx accepts as a Host, an optional leading dot or
 * one leading `*.` label, ending with a label. Returns nginx-acme's words
 * for what is wrong, or undefined.
 */
export function dnsIdentifierError(name: string): string | undefined {
  let state: 'start' | 'label' | 'dot' | 'wildcard' = 'start';
  for (let i = 0; i < name.length; i++) {
    const ch = name.charCodeAt(i);
    const c = name[i];
    if (ch <= 0x20 || ch >= 0x7f) return `invalid character ${ch.toString(16)} at position ${i}`;
    if (c === '*' && state === 'start') state = 'wildcard';
    else if (c === '.' && state !== 'dot') state = 'dot';
    else if (state === 'wildcard') return `unexpected character '${c}' at position ${i}`;
    else if (/[A-Za-z0-9\-_~%!$&'()+,;=]/.test(c)) state = 'label';
    else return `unexpected character '${c}' at position ${i}`;
  }
  return state === 'label' ? undefined : 'does not end with a label';
}
