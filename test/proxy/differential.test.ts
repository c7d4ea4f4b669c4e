/**
 * Differential tests for the reverse proxy: Debian's nginx 1.22 and Gatehouse
 * on one configuration (differential-conf.ts), the same raw requests, the
 * same scripted upstreams. Every exchange compares the bytes the upstreams
 * received, the bytes the client received, the access-log line (every
 * $upstream_* variable) and the error-log lines; times are compared by
 * format. Reference: nginx; where Gatehouse deliberately differs (nginx 1.23+
 * behaviour, docs/proxy.md) the part is named and checked on Gatehouse alone.
 * Without nginx, the assertions written here still check Gatehouse.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { freePort } from '../kit/server.ts';
import type { RequestPart } from '../kit/client.ts';
import { Differential } from './differential-kit.ts';
import type { ExchangeOptions, Observation } from './differential-kit.ts';
import { conf, scripts } from './differential-conf.ts';

const d = new Differential();
const stops: Array<() => unknown> = [];

before(async () => {
  await d.startUpstreams(['a', 'b', 'unix:sock']);
  d.scripts = scripts((n) => d.addr(n));
  // proxy_pass_request_body off keeps the client's Content-Length (as nginx does): no body follows
  d.headOnly = (head) => head.startsWith('POST /nobody/');
  const dead = `127.0.0.1:${await freePort()}`;
  await d.start({ after: (fn) => { stops.push(fn); } }, conf(d.addr('a'), d.addr('b'), dead, d.sockPath('sock')));
});

after(async () => {
  await Promise.all(stops.map((s) => s()));
  await d.close();
});

const get = (uri: string, extra = '', version = '1.1') => `GET ${uri} HTTP/${version}\r\nHost: localhost\r\n${extra}Connection: close\r\n\r\n`;
const post = (uri: string, body: string, extra = '') =>
  `POST ${uri} HTTP/1.1\r\nHost: localhost\r\n${extra}Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`;
const chunkedPost = (uri: string): RequestPart[] => [`POST ${uri} HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`,
  { delayMs: 60 }, '3\r\nabc\r\n', { delayMs: 30 }, '2\r\nde\r\n0\r\n\r\n'];

/**
 * The exchange through Gatehouse, then nginx: every part of what they caused must agree, except
 * the parts in `differ` (documented differences). Returns Gatehouse's observation.
 */
async function same(raw: RequestPart | RequestPart[], opts: ExchangeOptions & { differ?: Array<keyof Observation> } = {}): Promise<Observation> {
  const { gh, ng } = await d.both(raw, opts);
  if (ng) {
    const what = JSON.stringify(Array.isArray(raw) ? raw[0] : raw).slice(0, 70);
    for (const k of Object.keys(ng) as Array<keyof Observation>) {
      if (!opts.differ?.includes(k)) assert.deepEqual(gh[k], ng[k], `${k} of ${what} (gatehouse vs nginx)`);
    }
  }
  return gh;
}

/** A field of the access-log line, e.g. us="…". */
const field = (o: Observation, name: string): string => new RegExp(`(?:^| )${name}="([^"]*)"`).exec(o.access[0] ?? '')?.[1] ?? '';

test('proxy_pass URI rules: URI part, regex locations, rewrite break, variables, upstream names, unix sockets', async () => {
  const extra = 'User-Agent: t\r\nX_Under: u\r\nKeep-Alive: 3\r\nTE: trailers\r\nExpect: x\r\nAccept: */*\r\n';
  const sent: Record<string, string> = {
    '/plain/a/b?x=1': '/plain/a/b?x=1', '/plain/a%20b/../c': '/plain/a%20b/../c', '/uri/x/y?q': '/other/x/y?q',
    '/noslash/z': '/x/z', '/re/a//b?x': '/re/a//b?x', '/recap/p/q?r=1': '/cap/p/q?r=1', '/rw/a%20b?q=1': '/new/a%20b?q=1',
    '/rwuri/a?q': '/new/a?q', '/rwargs/a?q=1': '/new/a?added=1&q=1', '/rwlast/a%2fb?z': '/other/a/b?z', '/var/a?x': '/var/a?x',
    '/varuri/a%20b?x=1': '/v/varuri/a b?x=1', '/varpool/a': '/varpool/a', '/pool/a': '/pool/a', '/unix/a?x': '/u/a?x',
    '/sockgroup/s': '/sockgroup/s', '/uri/%41%3F%20b': '/other/A%3F%20b', '/uri//x': '/other/x', '/uri/%C3%A9': '/other/%C3%A9',
    '/recap/a%20b': '/cap/a b', '/uri/a;b': '/other/a;b', '/uri/x?a=%20': '/other/x?a=%20',
  };
  for (const [uri, want] of Object.entries(sent)) {
    const o = await same(get(uri, extra));
    assert.equal(/^\w+#\d+: \S+ (.*) HTTP\/1\.0\r\n/.exec(o.upstream[0] ?? '')?.[1], want, uri);
  }
  // hop-by-hop and underscored fields are not passed; the http-level proxy_set_header is inherited
  const o = await same(get('/plain/h', extra));
  assert.match(o.upstream[0], /^a#1: GET \/plain\/h HTTP\/1\.0\r\nX-Http-Level: http\r\nHost: 127\.0\.0\.1:\d+\r\nConnection: close\r\nUser-Agent: t\r\nAccept: \*\/\*\r\n\r\n$/);
  assert.match((await same(get('/unix/a'))).upstream[0], /^sock#1: GET \/u\/a HTTP\/1\.0\r\nX-Http-Level: http\r\nHost: localhost\r\n/);
});

test('proxy_set_header: own lines override the inherited ones, empty values remove; versions; headers and body switches', async () => {
  const hset = await same(get('/hset/x', 'X-Forwarded-For: 10.0.0.1\r\nX-Forwarded-For: 10.0.0.2\r\nAccept: a\r\n'));
  assert.match(hset.upstream[0], /^a#1: GET \/hset\/x HTTP\/1\.0\r\nX-Http-Level: loc\r\nHost: localhost:PORT\r\nX-Forwarded-For: 10\.0\.0\.1, 10\.0\.0\.2, 127\.0\.0\.1\r\nX-Real-IP: 127\.0\.0\.1\r\nConnection: close\r\n\r\n$/);
  await same('GET /hset/x HTTP/1.0\r\n\r\n');
  assert.match((await same(get('/hostempty/x'))).upstream[0], /^a#1: GET \/hostempty\/x HTTP\/1\.0\r\nConnection: close\r\n\r\n$/);
  assert.match((await same(get('/v11/x'))).upstream[0], /^a#1: GET \/v11\/x HTTP\/1\.1\r\n/);
  assert.doesNotMatch((await same(post('/nohdr/x', 'abc', 'X-Foo: bar\r\n'))).upstream[0], /X-Foo/);
  assert.match((await same(post('/nobody/x', 'abc', 'X-Foo: bar\r\n'))).upstream[0], /X-Foo: bar\r\n\r\n$/);
  assert.match((await same(post('/setbody/x?x=5', 'abc'))).upstream[0], /Content-Length: 3\r\n\r\nx=5$/);
  await same(get('/setbody/x?x=5'));
  assert.match((await same(get('/method/x'))).upstream[0], /^a#1: PATCH \/method\/x /);
  await same(get('/plain/dup', 'Cookie: a=1\r\nCookie: b=2\r\nX-Foo: 1\r\nx-foo: 2\r\nX-Empty:\r\nX-Sp:  v  \r\nX-8: caf\xe9\r\n'));
  await same('GET http://Other.Example:99/plain/abs?q HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
  await same(get('/ifloc/x?x=1'));
  await same(get('/ifloc/x'));
});

test('request bodies: chunked with proxy_request_buffering on/off and HTTP/1.0 vs 1.1, Expect, spooled bodies', async () => {
  assert.match((await same(chunkedPost('/plain/c'))).upstream[0], /Content-Length: 5\r\n\r\nabcde$/);
  await same(chunkedPost('/v11/c'));
  assert.match((await same(chunkedPost('/unbuf11/c'))).upstream[0], /Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n$/);
  await same(chunkedPost('/unbuf10/c'));
  await same(post('/unbuf11/c', 'abcdef'));
  await same(['POST /unbuf11/c HTTP/1.1\r\nHost: localhost\r\nContent-Length: 6\r\nConnection: close\r\n\r\nabc', { delayMs: 60 }, 'def']);
  await same(['POST /plain/exp HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 3\r\nConnection: close\r\n\r\n', { delayMs: 60 }, 'abc']);
  await same(post('/plain/zero', ''));
  await same('POST /plain/trailer HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n');
  // an upstream that answers before the body is complete
  await same(['POST /plain/s404 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\nConnection: close\r\n\r\nabc', { delayMs: 60 }, 'defghij']);
  // a body larger than client_body_buffer_size that arrives after the head goes to a temporary file
  const spooled = await same(['POST /bodyfile/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 30\r\nConnection: close\r\n\r\n', { delayMs: 40 }, 'a body longer than eight bytes.']);
  assert.match(spooled.errors[0] ?? '', /^\[warn\] a client request body is buffered to a temporary file PREFIX.*client_body_temp\/N, client/);
});

test('client side: hidden and passed fields, proxy_ignore_headers, X-Accel-*, empty and repeated fields', async () => {
  const hidden = await same(get('/plain/hidden'));
  assert.match(hidden.response, /^HTTP\/1\.1 200 OK\r\nServer: SERVER\/V\r\nDate: -\r\nContent-Length: 2\r\nConnection: close\r\nX-Secret: s\r\nX-Accel-Foo: f\r\nX-Accel-Bar: b\r\nX-Up: u\r\n\r\nok$/);
  assert.match((await same(get('/hide/hidden'))).response, /^HTTP\/1\.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\nServer: up\r\nDate: -\r\nX-Accel-Foo: f\r\n/);
  await same(get('/plain/accelbuf'));
  await same(get('/ignore/accelbuf'));
  assert.match((await same(get('/plain/accelredir'))).response, /\r\n\r\nerrpage 200 \/errpage\n$/);
  await same(get('/ignore/accelredir'));
  await same(get('/plain/accelargs?x=1'));
  // an empty Content-Type is not sent (nginx writes it only with a value)
  assert.match((await same(get('/plain/emptyval'))).response, /^HTTP\/1\.1 200 OK\r\nServer: SERVER\/V\r\nDate: -\r\nContent-Length: 2\r\nConnection: close\r\nX-Empty: \r\n\r\nok$/);
  await same(get('/plain/lowercase'));
  await same(get('/plain/up8bit'));
  // nginx 1.23+ joins repeated fields in $upstream_http_* (1.22 gives the first)
  const multi = await same(get('/plain/multi'), { differ: ['access'] });
  assert.equal(field(multi, 'uhx'), 'one, two');
  for (const k of ['h10', 'chunked', 'range', 'nocontent']) {
    await same(get(`/plain/${k}`));
    await same(get(`/plain/${k}`, '', '1.0'));
  }
  await same(get('/plain/range', 'Range: bytes=0-1\r\n'));
  await same(get('/plain/chunked', 'TE: trailers\r\n'));
});

test('HEAD: the upstream body is not read ($upstream_response_length 0, no warning); a 304 body is (warned)', async () => {
  const head = await same('HEAD /plain/headbody HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
  assert.equal(field(head, 'url'), '0');
  assert.deepEqual(head.errors, []);
  const notmod = await same(get('/plain/notmod'));
  assert.match(notmod.errors[0] ?? '', /^\[warn\] upstream sent more data than specified in "Content-Length" header while reading upstream/);
  assert.equal(field(notmod, 'url'), '5');
});

test('proxy_redirect: default, off, custom with $proxy_host, regex, with variables in proxy_pass', async () => {
  for (const l of ['rd', 'rdoff', 'rdcustom', 'rdregex', 'rdvar']) {
    for (const k of ['loc', 'locrel', 'locother']) await same(get(`/${l}/${k}`));
  }
  assert.match((await same(get('/rd/loc'))).response, /\r\nLocation: http:\/\/localhost:PORT\/rd\/next\?a=b\r\nConnection: close\r\nRefresh: 3; url=\/rd\/later\r\n/);
  assert.match((await same(get('/rdcustom/loc'))).response, /\r\nLocation: http:\/\/localhost:PORT\/mapped\/next\?a=b\r\n/);
});

test('proxy_intercept_errors with error_page: plain, named location, = and =code, redirect; upstream variables across redirects', async () => {
  for (const k of ['s404', 's500', 's503', 's502', 's418']) {
    await same(get(`/icpt/${k}`));
    await same(get(`/noicpt/${k}`));
  }
  const named = await same(get('/icpt/s500'));
  assert.equal(field(named, 'ua').replace(/\d+/g, 'P'), 'P.P.P.P:P : P.P.P.P:P');
  assert.equal(field(named, 'us'), '500 : 500');
  assert.equal(field(named, 'uct'), 'N.NNN : N.NNN');
  const page = await same(get('/icpt/s404'));
  assert.match(page.response, /^HTTP\/1\.1 404 Not Found\r\n.*\r\n\r\nerrpage 404 \/errpage\n$/s);
  assert.equal(field(page, 'ph'), '-');
  await same(get('/errdead/x'));
  await same(get('/errtimeout/hang'));
});

test('bad upstream responses: 502 pages, truncated bodies, error.log lines', async () => {
  for (const k of ['invalid', 'closebefore', 'closemid', 'closeafter', 'closehead', 'closeheadchunked', 'badchunk', 'badchunklater', 'extra']) {
    await same(get(`/plain/${k}`));
    // unbuffered, nginx logs a close found by its first write to the client "while sending to client",
    // one found later "while reading upstream": which one depends on when the FIN arrives (docs/proxy.md)
    const o = await same(get(`/unbuffered/${k}`), { differ: k.startsWith('close') ? ['errors'] : [] });
    if (k === 'closeafter') assert.match(o.errors[0], /^\[error\] upstream prematurely closed connection while (sending to client|reading upstream), client/);
  }
  // without buffering, an invalid chunk that came with the head is found while reading the head
  assert.match((await same(get('/unbuffered/badchunk'))).errors[0], /^\[error\] upstream sent invalid chunked response while reading response header from upstream/);
  // the head goes out before the connection closes, even when no body byte came
  assert.match((await same(get('/plain/closehead'))).response, /^HTTP\/1\.1 200 OK\r\n.*Content-Length: 10\r\nConnection: close\r\n\r\n$/s);
  const big = await same(get('/bigbuf/big'));
  assert.match(big.errors[0], /^\[error\] upstream sent too big header while reading response header from upstream, client/);
  assert.equal(field(big, 'ubr'), '1024');
  // nginx 1.23+ refuses a second Content-Length and both framings (1.22 passes them)
  for (const k of ['dupcl', 'tecl']) {
    const o = await same(get(`/plain/${k}`), { differ: ['response', 'access', 'errors'] });
    assert.match(o.response, /^HTTP\/1\.1 502 Bad Gateway\r\n/);
  }
});

test('timeouts and dead peers: 502/504, what was not flushed is dropped, variables', async () => {
  const t = await same(get('/timeout/hang'));
  assert.match(t.response, /^HTTP\/1\.1 504 Gateway Time-out\r\n/);
  assert.match(t.errors[0], /^\[error\] upstream timed out \(110: Connection timed out\) while reading response header from upstream/);
  await same(get('/timeout/hanghead'));
  assert.match((await same(get('/timeout/hangbody'))).response, /\r\nContent-Length: 10\r\nConnection: close\r\n\r\n$/);
  await same(get('/unbuftimeout/hanghead'));
  await same(get('/unbuftimeout/hangbody'));
  const dead = await same(get('/deadonly/x'));
  assert.match(dead.errors[0], /^\[error\] connect\(\) failed \(111: Connection refused\) while connecting to upstream/);
  assert.equal(field(dead, 'uct'), '-');
  for (let i = 0; i < 3; i++) await same(get(`/failover/${i}`));
  for (let i = 0; i < 2; i++) await same(get('/nolive/x'));
  await same(get('/backup/x'));
  await same(get('/resolve/x'));
  await same(post('/le/x', 'abc'));
});

test('proxy_next_upstream: http_502/http_404, off, non_idempotent, tries; POST not resent', async () => {
  for (const l of ['nu', 'nuoff', 'nuni', 'nutries']) {
    for (const k of ['afail', 'a404', 'both502', 'aclose']) {
      await same(get(`/${l}/${k}`));
      await same(get(`/${l}/${k}`));
      await same(post(`/${l}/${k}`, 'body'));
    }
  }
  await same(get('/nutimeout/hang'));
  const retried = await same(get('/nu/both502'));
  assert.equal(field(retried, 'us'), '502, 502');
  assert.equal(retried.upstream.length, 2);
});

test('keepalive upstream: connections reused, a closed one is not', async () => {
  for (let i = 0; i < 3; i++) await same(get('/ka/ka'));
  await same(get('/ka/kathenclose'));
  await new Promise((r) => setTimeout(r, 60));
  await same(get('/kaclose/ka'));
  assert.match((await same(post('/kaclose/ka', 'abc'))).upstream[0], /^a#\d+: POST \/kaclose\/ka HTTP\/1\.1\r\n/);
});

test('proxy_buffering off relays as data arrives; X-Accel-Buffering; proxy_max_temp_file_size 0', async () => {
  const cases: Record<string, string[]> = {
    unbuffered: ['slow', 'slowchunked', 'slowclose', 'large'], buffered: ['slowchunked', 'accelno', 'large'], maxtemp0: ['slow', 'large'],
  };
  for (const [l, keys] of Object.entries(cases)) for (const k of keys) await same(get(`/${l}/${k}`), { snapshotMs: 150 });
  const early = await same(get('/unbuffered/slow'), { snapshotMs: 150 });
  assert.match(early.early ?? '', /\r\n\r\nfirst$/);
  // buffered: nothing, not even the head, until the body is complete
  assert.equal((await same(get('/buffered/slow'), { snapshotMs: 150 })).early, '');
  await same(get('/ignore/accelno'), { snapshotMs: 150 });
});

test('WebSocket through map $http_upgrade $connection_upgrade: bytes both ways, closing', async () => {
  const up = 'GET /ws/ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: k\r\n\r\n';
  const o = await same([up, { delayMs: 60 }, 'ping', { delayMs: 60 }, 'bye'], { timeoutMs: 3000 });
  assert.match(o.response, /^HTTP\/1\.1 101 Switching Protocols\r\n.*\r\n\r\nhelloecho:pingecho:bye$/s);
  assert.match(o.upstream[0], /\r\nUpgrade: websocket\r\nConnection: upgrade\r\n/);
  await same([up, { delayMs: 60 }, 'ping'], { endAfterWrite: true, timeoutMs: 3000 });
  await same(get('/ws/wsrefuse'));
});
