// log_format, the built-in combined format and the three escapings, compared
// line by line with Debian's nginx 1.22 on the same configuration and the
// same requests (reference: nginx; times normalized). The expected escapes
// are also asserted on Gatehouse alone, from what nginx wrote.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startGatehouse, startNginx, nginxSkip } from '../kit/server.ts';
import type { RunningServer } from '../kit/server.ts';
import { rawRequest } from '../kit/client.ts';
import { waitLines } from './helpers.ts';
import { maskNameInBytesSent, maskNameInPageLength, signOf } from '../kit/server-name.ts';

const conf = `
events {}
http {
    log_format dflt escape=default '$request|$uri|$args|$arg_a|$arg_missing|$http_x_test|$http_user_agent|$remote_user|$status|$body_bytes_sent|$bytes_sent|$request_length|$pipe|$connection_requests|$request_method|$server_protocol|$binary_remote_addr|$sent_http_content_type|$http_referer';
    log_format json escape=json '{"r":"$request","u":"$uri","a":"$arg_a","m":"$arg_missing","h":"$http_x_test","ua":"$http_user_agent","s":$status,"b":$body_bytes_sent}';
    log_format none escape=none '$request|$uri|$arg_a|$arg_missing|$http_x_test|$status';
    log_format MultiPart 'a:' "$status" ':b' '\${uri}x' "$pipe$status";

    access_log %%PREFIX%%/combined.log;
    access_log %%PREFIX%%/default.log dflt;
    access_log %%PREFIX%%/json.log json;
    access_log %%PREFIX%%/none.log none;
    access_log %%PREFIX%%/multi.log multipart;

    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;
        location / { return 200 "hello\\n"; }
        location /missing { return 404; }
    }
}
`;

const H = 'Host: localhost\r\n';
/** Requests sent one after another, each on its own connection (the pipelined pair shares one). */
const requests: Array<string | Buffer> = [
  `GET /plain?a=1&b= HTTP/1.0\r\n${H}User-Agent: agent "007"\r\nReferer: http://ref.example/p?q\r\n\r\n`,
  `GET /esc/%22q%22%20%5C%1B%7F%C3%A9?a=%22x%22%09 HTTP/1.0\r\n${H}\r\n`,
  Buffer.from(`GET /hdr HTTP/1.0\r\n${H}X-Test: say "hi" \\ back\ttab \xc3\xa9\xff\r\n\r\n`, 'latin1'),
  `GET /auth HTTP/1.0\r\n${H}Authorization: Basic dXNlcjpwYXNz\r\n\r\n`,
  `GET /p1 HTTP/1.1\r\n${H}\r\nGET /p2?a=two HTTP/1.1\r\n${H}Connection: close\r\n\r\n`,
  `GET /missing HTTP/1.0\r\n${H}\r\n`,
  `HEAD /head HTTP/1.0\r\n${H}\r\n`,
];
const LINES = requests.length + 1; // the pipelined pair makes two lines

const FILES = ['combined.log', 'default.log', 'json.log', 'none.log', 'multi.log'];

async function scenario(srv: RunningServer): Promise<Record<string, string[]>> {
  const port = srv.port(8080);
  for (const req of requests) await rawRequest(port, req);
  const out: Record<string, string[]> = {};
  for (const f of FILES) {
    const got = await waitLines(srv, f, LINES);
    // the time is the only part that may differ between the runs
    out[f] = got.map((l) => l.replace(/\[\d\d\/\w{3}\/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\]/, '[TIME]'));
  }
  return out;
}

/** The byte counts of a page of the server's own (signed `sign`) as masking its name changes them. */
function maskCounts(file: string, line: string, sign: string): string {
  const body = (s: string, b: string) => String(maskNameInPageLength(Number(s), Number(b), sign));
  if (file === 'combined.log') return line.replace(/" (\d{3}) (\d+) "/, (_m, s: string, b: string) => `" ${s} ${body(s, b)} "`);
  if (file === 'json.log') return line.replace(/"s":(\d{3}),"b":(\d+)/, (_m, s: string, b: string) => `"s":${s},"b":${body(s, b)}`);
  if (file !== 'default.log') return line;
  // $status|$body_bytes_sent|$bytes_sent are the 9th to 11th fields
  const f = line.split('|');
  const [s, b, all] = [Number(f[8]), Number(f[9]), Number(f[10])];
  f[10] = String(maskNameInBytesSent(s, all, b, sign));
  f[9] = body(f[8]!, f[9]!);
  return f.join('|');
}

async function run(start: typeof startGatehouse, masked = false): Promise<Record<string, string[]>> {
  const srv = await start({ conf });
  try {
    const logs = await scenario(srv);
    if (masked) for (const f of FILES) logs[f] = logs[f]!.map((l) => maskCounts(f, l, signOf(srv)));
    return logs;
  } finally {
    await srv.stop();
  }
}

test('escapes and formats (Gatehouse, expectations taken from nginx)', async () => {
  const logs = await run(startGatehouse);
  const d = logs['default.log']!;
  assert.equal(d.length, LINES, d.join('\n'));
  // default escaping: \xHH for controls, quote, backslash, DEL and bytes above ASCII; absent is "-", empty stays empty
  assert.equal(d[0], 'GET /plain?a=1&b= HTTP/1.0|/plain|a=1&b=|1|-|-|agent \\x22007\\x22|-|200|6|' + d[0]!.split('|')[10] + '|' + d[0]!.split('|')[11] + '|.|1|GET|HTTP/1.0|\\x7F\\x00\\x00\\x01|text/plain|http://ref.example/p?q');
  assert.equal(d[1]!.split('|').slice(0, 5).join('|'),
    'GET /esc/%22q%22%20%5C%1B%7F%C3%A9?a=%22x%22%09 HTTP/1.0|/esc/\\x22q\\x22 \\x5C\\x1B\\x7F\\xC3\\xA9|a=%22x%22%09|%22x%22%09|-');
  assert.equal(d[2]!.split('|')[5], 'say \\x22hi\\x22 \\x5C back\\x09tab \\xC3\\xA9\\xFF');
  assert.equal(d[3]!.split('|')[7], 'user');
  assert.deepEqual(d.slice(4, 6).map((l) => l.split('|').slice(12, 14).join(' ')), ['. 1', 'p 2']);
  assert.equal(d[6]!.split('|')[8], '404');

  const j = logs['json.log']!;
  // json: absent is "", controls \u00XX, tab \t, quote and backslash escaped, bytes above ASCII as they are
  assert.equal(j[1], '{"r":"GET /esc/%22q%22%20%5C%1B%7F%C3%A9?a=%22x%22%09 HTTP/1.0","u":"/esc/\\"q\\" \\\\\\u001B\x7F\xC3\xA9","a":"%22x%22%09","m":"","h":"","ua":"","s":200,"b":6}');
  assert.equal(j[2]!.split(',')[4], '"h":"say \\"hi\\" \\\\ back\\ttab \xC3\xA9\xFF"');

  const n = logs['none.log']!;
  assert.equal(n[1], 'GET /esc/%22q%22%20%5C%1B%7F%C3%A9?a=%22x%22%09 HTTP/1.0|/esc/"q" \\\x1B\x7F\xC3\xA9|%22x%22%09||-|200'.replace('|-|', '||'));

  assert.deepEqual(logs['multi.log']!.slice(0, 2), ['a:200:b/plainx.200', 'a:200:b/esc/"q" \\x5C\\x1B\\x7F\\xC3\\xA9x.200'.replace(/"/g, '\\x22')]);
  assert.equal(logs['combined.log']![0], '127.0.0.1 - - [TIME] "GET /plain?a=1&b= HTTP/1.0" 200 6 "http://ref.example/p?q" "agent \\x22007\\x22"');
});

test('log lines are the same as nginx writes', { skip: nginxSkip }, async () => {
  const [ours, theirs] = [await run(startGatehouse, true), await run(startNginx, true)];
  for (const f of FILES) assert.deepEqual(ours[f], theirs[f], `${f} differs from nginx`);
});
