/**
 * For the gateway's TLS tests: a test CA made with openssl, certificates
 * it issues (RSA or ECDSA, for given names, client or server), and a TLS
 * client that says which certificate the server sent.
 */
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';

export interface Pem { cert: string; key: string; certFile: string; keyFile: string }

export class TestCa {
  readonly dir: string;
  readonly name: string;
  readonly cert: string;
  readonly certFile: string;
  private readonly keyFile: string;
  private serial = 1;

  /** A root CA, or with `parent` an intermediate CA it signs. */
  constructor(name = 'Gatehouse Test CA', parent?: TestCa) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-gwca-'));
    this.name = name;
    this.certFile = path.join(this.dir, 'ca.crt');
    this.keyFile = path.join(this.dir, 'ca.key');
    if (!parent) {
      execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${name}`, '-days', '2',
        '-keyout', this.keyFile, '-out', this.certFile], { stdio: 'ignore' });
    } else {
      const csr = path.join(this.dir, 'ca.csr');
      const ext = path.join(this.dir, 'ca.ext');
      fs.writeFileSync(ext, 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n');
      execFileSync('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${name}`, '-keyout', this.keyFile, '-out', csr], { stdio: 'ignore' });
      execFileSync('openssl', ['x509', '-req', '-in', csr, '-CA', parent.certFile, '-CAkey', parent.keyFile, '-set_serial', '77',
        '-extfile', ext, '-days', '2', '-out', this.certFile], { stdio: 'ignore' });
    }
    this.cert = fs.readFileSync(this.certFile, 'utf8');
  }

  /** A certificate for `names` (the first is the CN); `ec` for ECDSA P-256; `days` may be negative (expired). */
  issue(names: string[], opts: { ec?: boolean; client?: boolean; days?: number } = {}): Pem {
    const base = path.join(this.dir, `c${this.serial++}`);
    const keyFile = `${base}.key`;
    const certFile = `${base}.crt`;
    const keyArgs = opts.ec ? ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256'] : ['-newkey', 'rsa:2048'];
    execFileSync('openssl', ['req', ...keyArgs, '-nodes', '-subj', `/CN=${names[0]}`, '-keyout', keyFile, '-out', `${base}.csr`], { stdio: 'ignore' });
    const ext = `${base}.ext`;
    const san = names.map((n) => `DNS:${n}`).join(',');
    fs.writeFileSync(ext, `subjectAltName=${san}\nextendedKeyUsage=${opts.client ? 'clientAuth' : 'serverAuth'}\n`);
    const days = opts.days ?? 1;
    if (days > 0) {
      execFileSync('openssl', ['x509', '-req', '-in', `${base}.csr`, '-CA', this.certFile, '-CAkey', this.keyFile,
        '-set_serial', String(this.serial + 1000), '-extfile', ext, '-days', String(days), '-out', certFile], { stdio: 'ignore' });
    } else {
      // x509 cannot date a certificate in the past: `openssl ca` can
      const conf = `${base}.cnf`;
      fs.writeFileSync(`${base}.index`, '');
      fs.writeFileSync(`${base}.serial`, `${(this.serial + 1000).toString(16).padStart(4, '0')}\n`);
      fs.writeFileSync(conf, `[ca]\ndefault_ca = d\n[d]\ndatabase = ${base}.index\nnew_certs_dir = ${this.dir}\nserial = ${base}.serial\n`
        + 'default_md = sha256\npolicy = p\n[p]\ncommonName = supplied\n');
      execFileSync('openssl', ['ca', '-batch', '-config', conf, '-cert', this.certFile, '-keyfile', this.keyFile, '-in', `${base}.csr`,
        '-startdate', '20200101000000Z', '-enddate', '20200102000000Z', '-extfile', ext, '-notext', '-out', certFile], { stdio: 'ignore' });
    }
    return { cert: fs.readFileSync(certFile, 'utf8'), key: fs.readFileSync(keyFile, 'utf8'), certFile, keyFile };
  }
}

/** What a handshake gave: the server's certificate (its CN and key type), or the error. */
export interface Handshake {
  cn?: string;
  keyType?: string;
  fingerprint?: string;
  error?: string;
  /** The HTTP answer when a request was sent. */
  response?: string;
}

/** Connects with TLS to 127.0.0.1:port (SNI `servername`, none when undefined), optionally sends an HTTP request. */
export function handshake(port: number, servername: string | undefined, opts: {
  ca?: string; cert?: string; key?: string; request?: string; sigalgs?: string; maxVersion?: tls.SecureVersion;
} = {}): Promise<Handshake> {
  return new Promise((resolve) => {
    const socket = tls.connect({
      host: '127.0.0.1', port, servername: servername ?? '', rejectUnauthorized: false,
      ca: opts.ca, cert: opts.cert, key: opts.key, sigalgs: opts.sigalgs, maxVersion: opts.maxVersion,
    });
    const out: Handshake = {};
    const chunks: Buffer[] = [];
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      if (chunks.length) out.response = Buffer.concat(chunks).toString();
      socket.destroy();
      resolve(out);
    };
    socket.once('secureConnect', () => {
      const x = socket.getPeerX509Certificate();
      if (x) {
        out.cn = /CN=([^\n]+)/.exec(x.subject)?.[1];
        out.keyType = x.publicKey.asymmetricKeyType;
        out.fingerprint = x.fingerprint256;
      }
      if (opts.request === undefined) return finish();
      socket.write(opts.request);
    });
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.once('end', finish);
    socket.once('close', finish);
    socket.once('error', (e) => {
      out.error = e.message;
      finish();
    });
  });
}

export function fingerprintOf(pem: string): string {
  return new crypto.X509Certificate(pem).fingerprint256;
}
