/**
 * Distinguished names as nginx prints them: `$ssl_client_s_dn` is OpenSSL's
 * X509_NAME_print_ex(XN_FLAG_RFC2253) (last RDN first, `,` between RDNs,
 * `+` inside one, RFC 2253 escapes, bytes ≥ 0x80 as `\XX`, unknown string
 * types as `#` + DER hex); the `_legacy` variants are X509_NAME_oneline
 * (`/CN=a/O=b`, in certificate order).
 */
import { derChildren, oidText, readDer } from './der.ts';
import type { Der } from './der.ts';

/** OpenSSL's short names (OBJ_nid2sn) for the usual attribute types. */
const SHORT_NAMES: Record<string, string> = {
  '2.5.4.3': 'CN', '2.5.4.4': 'SN', '2.5.4.5': 'serialNumber', '2.5.4.6': 'C', '2.5.4.7': 'L',
  '2.5.4.8': 'ST', '2.5.4.9': 'street', '2.5.4.10': 'O', '2.5.4.11': 'OU', '2.5.4.12': 'title',
  '2.5.4.13': 'description', '2.5.4.15': 'businessCategory', '2.5.4.17': 'postalCode',
  '2.5.4.41': 'name', '2.5.4.42': 'GN', '2.5.4.43': 'initials', '2.5.4.44': 'generationQualifier',
  '2.5.4.46': 'dnQualifier', '2.5.4.65': 'pseudonym', '2.5.4.97': 'organizationIdentifier',
  '1.2.840.113549.1.9.1': 'emailAddress', '0.9.2342.19200300.100.1.25': 'DC',
  '0.9.2342.19200300.100.1.1': 'UID', '1.3.6.1.4.1.311.60.2.1.3': 'jurisdictionC',
  '1.3.6.1.4.1.311.60.2.1.2': 'jurisdictionST', '1.3.6.1.4.1.311.60.2.1.1': 'jurisdictionL',
};

interface Attribute {
  type: string;
  value: Der;
}

/** The RDNs of a Name (SEQUENCE OF SET OF AttributeTypeAndValue). */
function rdns(name: Buffer): Attribute[][] {
  const [seq] = readDer(name);
  return derChildren(seq).map((set) => derChildren(set).map((atv) => {
    const [oid, value] = derChildren(atv);
    return { type: SHORT_NAMES[oidText(oid.value)] ?? oidText(oid.value), value };
  }));
}

/** The string value of a directory string as UTF-8 bytes, or undefined for types OpenSSL dumps. */
function stringBytes(v: Der): Buffer | undefined {
  switch (v.tag) {
    case 0x0c: case 0x13: case 0x16: case 0x12: case 0x1a: // UTF8, Printable, IA5, Numeric, Visible
      return v.value;
    case 0x14: // T61String: bytes are Latin-1 for OpenSSL
      return Buffer.from(v.value.toString('latin1'), 'utf8');
    case 0x1e: { // BMPString
      const swapped = Buffer.from(v.value);
      swapped.swap16();
      return Buffer.from(swapped.toString('utf16le'), 'utf8');
    }
    case 0x1c: { // UniversalString (UTF-32BE)
      let s = '';
      for (let i = 0; i + 3 < v.value.length; i += 4) s += String.fromCodePoint(v.value.readUInt32BE(i));
      return Buffer.from(s, 'utf8');
    }
    default:
      return undefined;
  }
}

const hex2 = (b: number) => b.toString(16).toUpperCase().padStart(2, '0');

/** One value with ASN1_STRFLGS_RFC2253 escaping. */
function rfc2253Value(v: Der): string {
  const bytes = stringBytes(v);
  if (!bytes) return '#' + v.raw.toString('hex').toUpperCase();
  let out = '';
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i];
    if (c > 0x7f || c < 0x20 || c === 0x7f) { out += '\\' + hex2(c); continue; }
    const ch = String.fromCharCode(c);
    if (',+"\\<>;'.includes(ch) || (i === 0 && (ch === '#' || ch === ' ')) || (i === bytes.length - 1 && ch === ' ')) out += '\\' + ch;
    else out += ch;
  }
  return out;
}

/** `$ssl_client_s_dn` / `$ssl_client_i_dn` format from a DER Name. */
export function dnRfc2253(name: Buffer): string {
  try {
    return rdns(name).reverse().map((rdn) => rdn.map((a) => `${a.type}=${rfc2253Value(a.value)}`).join('+')).join(',');
  } catch {
    return '';
  }
}

/** `$ssl_client_s_dn_legacy` format (X509_NAME_oneline). */
export function dnOneline(name: Buffer): string {
  try {
    let out = '';
    for (const rdn of rdns(name)) {
      rdn.forEach((a, i) => {
        const bytes = stringBytes(a.value) ?? a.value.value;
        let s = '';
        // OpenSSL 3 escapes the separators `/` and `+` inside values
        for (const c of bytes) s += c < 0x20 || c > 0x7e ? '\\x' + hex2(c) : c === 0x2f || c === 0x2b ? '\\' + String.fromCharCode(c) : String.fromCharCode(c);
        out += `${i ? '+' : '/'}${a.type}=${s}`;
      });
    }
    return out;
  } catch {
    return '';
  }
}

/** The issuer and subject Names (DER) of a certificate. */
export function certificateNames(der: Buffer): { issuer: Buffer; subject: Buffer } {
  const [cert] = readDer(der);
  const [tbs] = derChildren(cert);
  const fields = derChildren(tbs);
  // tbsCertificate: [0] version?, serialNumber, signature, issuer, validity, subject, ...
  const start = fields[0].tag === 0xa0 ? 1 : 0;
  return { issuer: fields[start + 2].raw, subject: fields[start + 4].raw };
}
