/**
 * limit_rate / limit_rate_after / $limit_rate / X-Accel-Limit-Rate, on
 * Gatehouse and Debian's nginx alike. Pacing is asserted as an upper bound
 * on what may have arrived by each moment (nginx's allowance: rate × (whole
 * seconds since the request began + 1) − bytes sent, after
 * limit_rate_after): a busy machine only makes bytes later, never earlier,
 * so these bounds cannot fail by load. Where a test says something is not
 * throttled, its bound is several times what throttling would take.
 */
import { test } from 'node:test';
import type { TestContext } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import type { RunningServer } from '../kit/server.ts';
import { binaries, confTest, startBoth, waitLines } from './limit-kit.ts';

const RATE = 2048;
const body = (n: number) => 'x'.repeat(n);

const conf = `
events {}
http {
    access_log off;
    log_format rate '$uri $limit_rate';
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        root %%PREFIX%%/html;
        access_log %%PREFIX%%/rate.log rate;
        location /slow/ { limit_rate ${RATE}; }
        location /after/ { limit_rate 1k; limit_rate_after 6000; }
        location /var/ { limit_rate $arg_l; limit_rate_after $arg_a; }
        location /set/ { limit_rate 0; set $limit_rate ${RATE}; }
        location /early { limit_rate 12k; return 200 "[$limit_rate]"; }
        location /proxied/ { proxy_pass http://127.0.0.1:%%PORT_8081%%/; }
        location /ignored/ { proxy_pass http://127.0.0.1:%%PORT_8081%%/; proxy_ignore_headers X-Accel-Limit-Rate; }
        location /unbuffered/ { limit_rate ${RATE}; proxy_buffering off; proxy_pass http://127.0.0.1:%%PORT_8081%%/; }
    }
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        server_name localhost;
        access_log off;
        root %%PREFIX%%/html;
        location / { add_header X-Accel-Limit-Rate ${RATE}; }
    }
}
`;

const files = {
  'html/slow/8k': body(8192), 'html/after/8k': body(8000), 'html/var/8k': body(8192), 'html/set/8k': body(8192),
  'html/8k': body(8192),
};

interface Timed {
  /** Ms since the request was written, and bytes received by then (head included). */
  arrivals: Array<{ ms: number; total: number }>;
  text: string;
  ms: number;
}

/** One request on a fresh connection, with when each piece of the answer arrived. */
function timedGet(srv: RunningServer, path: string): Promise<Timed> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(srv.port(8080), '127.0.0.1');
    const chunks: Buffer[] = [];
    const arrivals: Timed['arrivals'] = [];
    let total = 0;
    let start = 0;
    sock.on('connect', () => {
      start = performance.now();
      sock.write(`GET ${path} HTTP/1.0\r\nHost: localhost\r\n\r\n`);
    });
    sock.on('data', (b) => {
      chunks.push(b);
      total += b.length;
      arrivals.push({ ms: performance.now() - start, total });
    });
    sock.on('error', reject);
    sock.on('close', () => resolve({ arrivals, text: Buffer.concat(chunks).toString('latin1'), ms: performance.now() - start }));
    sock.setTimeout(30000, () => sock.destroy(new Error(`${srv.flavor}: ${path} took over 30 s`)));
  });
}

const HEAD_SLACK = 400;

/** Nothing arrived sooner than nginx's allowance lets it: by t ms, at most after + rate × (t/1000 + 2) bytes and a head. */
function assertPaced(srv: RunningServer, r: Timed, rate: number, after = 0): void {
  for (const { ms, total } of r.arrivals) {
    const allowed = after + rate * (ms / 1000 + 2) + HEAD_SLACK;
    assert.ok(total <= allowed, `${srv.flavor}: ${total} bytes by ${Math.round(ms)} ms, at most ${Math.round(allowed)} allowed`);
  }
}

function bodyOf(r: Timed): string {
  return r.text.slice(r.text.indexOf('\r\n\r\n') + 4);
}

/** Runs `check` on Gatehouse and nginx side by side (each paced test takes seconds). */
async function eachServer(t: TestContext, check: (srv: RunningServer) => Promise<void>): Promise<void> {
  await Promise.all((await startBoth(t, { conf, files })).map(check));
}

test('limit_rate paces the body: nothing ahead of rate × (seconds + 1), all of it intact', async (t) => {
  await eachServer(t, async (srv) => {
    const r = await timedGet(srv, '/slow/8k');
    assert.equal(bodyOf(r), body(8192));
    assertPaced(srv, r, RATE);
    // 8 KiB at 2 KiB/s with a second's allowance up front takes three seconds; never under two
    assert.ok(r.ms >= 1900, `${srv.flavor}: ${Math.round(r.ms)} ms`);
    assert.ok(r.arrivals.length >= 3, `${srv.flavor}: the body came in ${r.arrivals.length} pieces`);
  });
});

test('limit_rate_after: the first bytes go at once, the rest at the rate', async (t) => {
  await eachServer(t, async (srv) => {
    const r = await timedGet(srv, '/after/8k');
    assert.equal(bodyOf(r), body(8000));
    assertPaced(srv, r, 1024, 6000);
    // 7 KiB at 1 KiB/s would take six seconds; after 6000 bytes one more second is left
    assert.ok(r.ms < 4500, `${srv.flavor}: ${Math.round(r.ms)} ms`);
    assert.ok(r.ms >= 900, `${srv.flavor}: ${Math.round(r.ms)} ms`);
  });
});

test('limit_rate and limit_rate_after with variables; $limit_rate as set and as logged', async (t) => {
  await eachServer(t, async (srv) => {
    const paced = await timedGet(srv, `/var/8k?l=${RATE}&a=100`);
    assertPaced(srv, paced, RATE, 100);
    assert.ok(paced.ms >= 1900, `${srv.flavor}: ${Math.round(paced.ms)} ms`);
    // an after beyond the body, and values that are no sizes, leave it unthrottled
    for (const q of ['?l=1k&a=9000', '?l=abc', '']) {
      const r = await timedGet(srv, `/var/8k${q}`);
      assert.equal(bodyOf(r), body(8192));
      assert.ok(r.ms < 3000, `${srv.flavor}: /var/8k${q} took ${Math.round(r.ms)} ms`);
    }
    const set = await timedGet(srv, '/set/8k');
    assertPaced(srv, set, RATE);
    assert.ok(set.ms >= 1900, `${srv.flavor}: set $limit_rate: ${Math.round(set.ms)} ms`);
    // before the head goes out, $limit_rate is only what `set` put there
    assert.equal(bodyOf(await timedGet(srv, '/early')), '[0]');
    const lines = await waitLines(srv, 'rate.log', 6);
    assert.deepEqual(lines, ['/var/8k 2048', '/var/8k 1024', '/var/8k 0', '/var/8k 0', '/set/8k 2048', '/early 12288'], srv.flavor);
  });
});

test("an upstream's X-Accel-Limit-Rate paces the response unless ignored; an unbuffered one is not paced", async (t) => {
  await eachServer(t, async (srv) => {
    const r = await timedGet(srv, '/proxied/8k');
    assert.equal(bodyOf(r), body(8192));
    assertPaced(srv, r, RATE);
    assert.ok(r.ms >= 1900, `${srv.flavor}: ${Math.round(r.ms)} ms`);
    assert.doesNotMatch(r.text, /X-Accel-Limit-Rate/i);
    for (const path of ['/ignored/8k', '/unbuffered/8k']) {
      const fast = await timedGet(srv, path);
      assert.equal(bodyOf(fast), body(8192));
      assert.ok(fast.ms < 1500, `${srv.flavor}: ${path} took ${Math.round(fast.ms)} ms`);
    }
  });
});

test('limit_rate and limit_rate_after take sizes: the same -t errors as nginx', () => {
  for (const [name, bin] of binaries()) {
    const errs = (d: string) => confTest(bin, `events {} http { server { listen 127.0.0.1:1; location / { ${d} } } }`);
    assert.match(errs('limit_rate abc;')[0] ?? '', /^"limit_rate" directive invalid value in /, name);
    assert.match(errs('limit_rate_after 1x;')[0] ?? '', /^"limit_rate_after" directive invalid value in /, name);
    assert.match(errs('limit_rate 1k 2k;')[0] ?? '', /^invalid number of arguments in "limit_rate" directive in /, name);
    assert.deepEqual(errs('limit_rate 1m; limit_rate_after $arg_a;'), [], name);
  }
});
