/**
 * `-t` on the directives of auth_request, mirror, addition, userid,
 * secure_link, random_index and stub_status: accepted forms and nginx's
 * messages for wrong ones, compared with Debian's nginx 1.22.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { httpConf, sameCheck } from './small-modules-kit.ts';

const server = (body: string) => httpConf(`    server {\n        listen 127.0.0.1:8080;\n        location / {\n${body}\n        }\n    }`);

test('accepted forms', async () => {
  const r = await sameCheck(server(`
            auth_request /auth;
            auth_request_set $who $upstream_http_x_user;
            auth_request_set $args "a=1";
            mirror /m1;
            mirror /m2;
            mirror_request_body off;
            add_before_body /b;
            add_after_body /a;
            addition_types text/plain application/json;
            userid v1;
            userid_name sid;
            userid_domain none;
            userid_path /p;
            userid_expires 1d;
            userid_flags secure httponly;
            userid_flags samesite=strict httponly;
            userid_p3p none;
            userid_service 12;
            userid_mark =;
            secure_link $arg_h,$arg_e;
            secure_link_md5 "$uri secret";
            random_index on;
            stub_status;`));
  assert.equal(r.code, 0, r.lines.join('\n'));
});

test('refused forms and their messages', async () => {
  for (const body of [
    'auth_request /a; auth_request /b;',
    'auth_request_set who value;',
    'auth_request_set $uri value;',
    'mirror off; mirror /m;',
    'mirror /m; mirror off;',
    'add_before_body /a; add_before_body /b;',
    'userid maybe;',
    'userid_mark ab;',
    'userid_mark -;',
    'userid_expires soon;',
    'userid_expires max; userid_expires off;',
    'userid_flags fancy;',
    'userid_service x;',
    'secure_link_md5 "${unclosed";',
    'random_index yes;',
    'stub_status a b;',
  ]) {
    const r = await sameCheck(server(`            ${body}`));
    assert.equal(r.code, 1, body);
  }
});
