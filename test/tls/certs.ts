/**
 * Test certificates made with `openssl`, the way nginx's own tests make
 * them: a root CA, an intermediate, leaves (RSA and ECDSA), client
 * certificates, revocations and OCSP responses (`openssl ca` / `openssl
 * ocsp` with an index file). Everything is written into one directory
 * (usually a test prefix made beforehand with mkdtemp).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export class CertFactory {
  readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
    fs.mkdirSync(dir, { recursive: true });
    this.write('openssl.conf', [
      '[ req ]', 'default_bits = 2048', 'encrypt_key = no', 'distinguished_name = req_distinguished_name',
      'x509_extensions = ext', '[ req_distinguished_name ]', '[ ext ]', 'basicConstraints = critical,CA:TRUE', '',
    ].join('\n'));
    this.write('certserial', '1000');
    this.write('certindex', '');
  }

  file(name: string): string {
    return path.join(this.dir, name);
  }

  read(name: string): Buffer {
    return fs.readFileSync(this.file(name));
  }

  write(name: string, data: string | Buffer): void {
    fs.writeFileSync(this.file(name), data);
  }

  private openssl(...args: string[]): void {
    execFileSync('openssl', args, { cwd: this.dir, stdio: ['ignore', 'ignore', 'pipe'] });
  }

  /** ca.conf for signing (its name): CA:TRUE unless `ca` is false, and an OCSP responder URL in issued certificates' AIA. */
  private caConf(ocspUrl?: string, ca = true): string {
    const name = `ca-${ocspUrl ? 'ocsp' : 'plain'}-${ca ? 'ca' : 'leaf'}.conf`;
    this.write(name, [
      '[ ca ]', 'default_ca = myca', '[ myca ]', `new_certs_dir = ${this.dir}`, `database = ${this.dir}/certindex`,
      'default_md = sha256', 'policy = myca_policy', `serial = ${this.dir}/certserial`, 'default_days = 3',
      'x509_extensions = myca_extensions', 'unique_subject = no', 'preserve = yes', '[ myca_policy ]', 'commonName = supplied',
      'countryName = optional', 'organizationName = optional', 'organizationalUnitName = optional', 'UID = optional',
      '[ myca_extensions ]', `basicConstraints = critical,CA:${ca ? 'TRUE' : 'FALSE'}`,
      ...(ocspUrl ? [`authorityInfoAccess = OCSP;URI:${ocspUrl}`] : []), '',
    ].join('\n'));
    return name;
  }

  /** A self-signed certificate `name`.crt / `name`.key (RSA, or EC P-256). */
  selfSigned(name: string, opts: { ec?: boolean; subject?: string } = {}): void {
    const subj = opts.subject ?? `/CN=${name}/`;
    if (opts.ec) {
      this.openssl('ecparam', '-genkey', '-name', 'prime256v1', '-out', `${name}.key`);
      this.openssl('req', '-x509', '-new', '-key', `${name}.key`, '-config', 'openssl.conf', '-subj', subj, '-out', `${name}.crt`);
    } else {
      this.openssl('req', '-x509', '-new', '-config', 'openssl.conf', '-subj', subj, '-out', `${name}.crt`, '-keyout', `${name}.key`);
    }
  }

  /** A certificate `name` signed by `issuer` (CA:TRUE unless leaf), optionally EC, with an OCSP URL in AIA. */
  signed(name: string, issuer: string, opts: { ec?: boolean; ocspUrl?: string; leaf?: boolean; subject?: string } = {}): void {
    const subj = opts.subject ?? `/CN=${name}/`;
    if (opts.ec) {
      this.openssl('ecparam', '-genkey', '-name', 'prime256v1', '-out', `${name}.key`);
      this.openssl('req', '-new', '-key', `${name}.key`, '-config', 'openssl.conf', '-subj', subj, '-out', `${name}.csr`);
    } else {
      this.openssl('req', '-new', '-utf8', '-config', 'openssl.conf', '-subj', subj, '-out', `${name}.csr`, '-keyout', `${name}.key`);
    }
    this.openssl('ca', '-batch', '-utf8', '-config', this.caConf(opts.ocspUrl, !opts.leaf), '-keyfile', `${issuer}.key`, '-cert', `${issuer}.crt`,
      '-subj', subj, '-in', `${name}.csr`, '-out', `${name}.crt`);
  }

  /** Marks `name` revoked in the index (for CRLs and OCSP responses made afterwards). */
  revoke(name: string, issuer: string): void {
    this.openssl('ca', '-config', this.caConf(), '-revoke', `${name}.crt`, '-keyfile', `${issuer}.key`, '-cert', `${issuer}.crt`);
  }

  /** A CRL of `issuer` (PEM) from the index. */
  crl(out: string, issuer: string): void {
    if (!fs.existsSync(this.file('crlnumber'))) this.write('crlnumber', '1000');
    const conf = this.read(this.caConf()).toString()
      .replace('[ myca ]\n', `[ myca ]\ncrlnumber = ${this.dir}/crlnumber\ndefault_crl_days = 1\n`);
    this.write('crl.conf', conf);
    this.openssl('ca', '-gencrl', '-config', 'crl.conf', '-keyfile', `${issuer}.key`, '-cert', `${issuer}.crt`, '-out', out);
  }

  /** An OCSP response (DER) for `cert` issued by `issuer`, signed by `signer`, from the index. */
  ocspResponse(out: string, cert: string, issuer: string, signer = issuer): void {
    this.openssl('ocsp', '-issuer', `${issuer}.crt`, '-cert', `${cert}.crt`, '-reqout', `${out}.req`);
    this.openssl('ocsp', '-index', 'certindex', '-CA', `${issuer}.crt`, '-rsigner', `${signer}.crt`, '-rkey', `${signer}.key`,
      '-reqin', `${out}.req`, '-respout', out, '-ndays', '1');
  }

  /** Concatenates files (a chain: leaf first). */
  concat(out: string, ...names: string[]): void {
    this.write(out, Buffer.concat(names.map((n) => this.read(n))));
  }
}
