// ngx_http_acme_module's configuration errors, worded as nginx-acme words
// them (its src/conf.rs and src/conf/*.rs), checked with `gatehouse -t`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gatehouseBinary } from '../kit/server.ts';

function check(http: string): { ok: boolean; stderr: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gh-acme-conf-'));
  try {
    fs.mkdirSync(path.join(dir, 'logs'));
    fs.writeFileSync(path.join(dir, 'nginx.conf'), `events {}\nhttp {\n${http}\n}\n`);
    const r = spawnSync(gatehouseBinary, ['-t', '-p', `${dir}/`, '-c', 'nginx.conf', '-e', 'error.log', '-g', `pid ${dir}/nginx.pid;`], { encoding: 'utf8' });
    return { ok: r.status === 0, stderr: r.stderr.replaceAll(dir, 'PREFIX') };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const ISSUER = 'acme_issuer le { uri https://127.0.0.1:14000/dir; state_path off; }';
const SERVER = (directive: string, names = 'example.test') => `server { listen 127.0.0.1:8443 ssl; server_name ${names}; ${directive} ssl_certificate $acme_certificate; ssl_certificate_key $acme_certificate_key; }`;

const CASES: Array<[string, string, RegExp]> = [
  ['no uri', 'acme_issuer le {\n  contact a@b.test;\n}', /\[emerg\] acme_issuer: "uri" is missing in PREFIX\/nginx\.conf:5/],
  ['unknown challenge', 'acme_issuer le {\n  uri https://127.0.0.1/dir;\n  challenge dns-02;\n}', /\[emerg\] unsupported challenge: dns-02 in PREFIX\/nginx\.conf:5/],
  ['dns-01 without a hook or a responder', 'acme_issuer le {\n  uri https://127.0.0.1/dir;\n  challenge dns-01;\n}', /\[emerg\] acme_issuer: "dns_hook" or "acme_dns_port" is needed for the dns-01 challenge of issuer "le"/],
  ['acme_dns_port value', 'acme_dns_port 127.0.0.1:99999;', /\[emerg\] "acme_dns_port" directive invalid value/],
  ['duplicate challenge', 'acme_issuer le { uri https://127.0.0.1/dir; challenge http-01; challenge tls-alpn-01; }', /\[emerg\] "challenge" directive is duplicate/],
  ['unknown directive in an issuer', 'acme_issuer le { uri https://127.0.0.1/dir; foo bar; }', /\[emerg\] unknown directive "foo"/],
  ['argument count in an issuer', 'acme_issuer le { uri https://127.0.0.1/dir https://x/; }', /\[emerg\] invalid number of arguments in "uri"/],
  ['duplicate issuer', `${ISSUER}\n${ISSUER}`, /\[emerg\] "acme_issuer" directive is duplicate/],
  ['bad account key curve', 'acme_issuer le { uri https://127.0.0.1/dir; account_key ecdsa:123; }', /\[emerg\] account_key: unsupported curve/],
  ['missing account key file', 'acme_issuer le { uri https://127.0.0.1/dir; account_key /nonexistent.key; }', /\[emerg\] acme_issuer: cannot load account key: /],
  ['EAB key not base64url', 'acme_issuer le { uri https://127.0.0.1/dir; external_account_key kid data:a+b/c; }', /\[emerg\] "external_account_key" directive invalid base64url encoded value/],
  ['ssl_verify not a flag', 'acme_issuer le { uri https://127.0.0.1/dir; ssl_verify yes; }', /\[emerg\] invalid value "yes" in "ssl_verify" directive, it must be "on" or "off"/],
  ['profile with a bad second word', 'acme_issuer le { uri https://127.0.0.1/dir; profile short please; }', /\[emerg\] "profile" directive invalid value/],
  ['missing trusted certificate', 'acme_issuer le { uri https://127.0.0.1/dir; ssl_trusted_certificate /nonexistent.pem; }', /\[emerg\] acme_issuer: trusted ceritificate configuration failed/],
  ['shared zone without zone=', 'acme_shared_zone acme:256k;', /\[emerg\] "acme_shared_zone" must have "zone" parameter/],
  ['shared zone too small', 'acme_shared_zone zone=acme:1k;', /\[emerg\] acme_shared_zone: zone acme is too small/],
  ['shared zone size', 'acme_shared_zone zone=acme;', /\[emerg\] acme_shared_zone: invalid zone size "acme"/],
  ['duplicate shared zone', 'acme_shared_zone zone=a:256k;\nacme_shared_zone zone=b:256k;', /\[emerg\] "acme_shared_zone" directive is duplicate/],
  ['unknown issuer', `${ISSUER}\n${SERVER('acme_certificate other;')}`, /\[emerg\] issuer "other" is missing/],
  ['unknown fallback issuer', `${ISSUER}\n${SERVER('acme_certificate le fallback=backup;')}`, /\[emerg\] issuer "backup" is missing/],
  ['empty fallback', `${ISSUER}\n${SERVER('acme_certificate le fallback=le,;')}`, /\[emerg\] "acme_certificate" directive invalid "fallback" value/],
  ['key size', `${ISSUER}\n${SERVER('acme_certificate le key=rsa:1024;')}`, /\[emerg\] acme_certificate: unsupported key size/],
  ['key from a file', `${ISSUER}\n${SERVER('acme_certificate le key=/etc/key.pem;')}`, /\[emerg\] "acme_certificate" directive invalid "key" value/],
  ['bad identifier', `${ISSUER}\n${SERVER('acme_certificate le www.example..test;')}`, /\[emerg\] acme_certificate: invalid server name: unexpected character '\.' at position 12/],
  ['no identifiers', `${ISSUER}\n${SERVER('acme_certificate le;', '""')}`, /\[emerg\] "acme_certificate": no identifiers found in "server_name"/],
  ['duplicate acme_certificate', `${ISSUER}\n${SERVER('acme_certificate le; acme_certificate le;')}`, /\[emerg\] "acme_certificate" directive is duplicate/],
  ['acme_certificate outside a server', `${ISSUER}\nacme_certificate le;`, /\[emerg\] "acme_certificate" directive is not allowed here/],
];

for (const [name, http, expected] of CASES) {
  test(`config error: ${name}`, () => {
    const r = check(http);
    assert.equal(r.ok, false, r.stderr);
    assert.match(r.stderr, expected);
  });
}

test('a configuration with every issuer directive, a regex server_name and explicit identifiers passes -t', () => {
  const r = check(`acme_issuer le {
    uri https://127.0.0.1:14000/dir;
    account_key rsa:2048;
    challenge tls-alpn;
    contact admin@example.test;
    contact mailto:other@example.test;
    external_account_key kid-1 data:zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W;
    preferred_chain "ISRG Root X1";
    profile shortlived require;
    ssl_verify off;
    state_path off;
    accept_terms_of_service;
  }
  acme_shared_zone zone=acme:512k;
  ${SERVER('acme_certificate le;', '.example.test ~^app\\d+\\.example\\.test$')}
  ${SERVER('acme_certificate le 127.0.0.1 Named.Example.Test key=ecdsa:384;', 'ignored.test')}`);
  assert.equal(r.ok, true, r.stderr);
  assert.match(r.stderr, /syntax is ok/);
});
