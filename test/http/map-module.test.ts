/**
 * ngx_http_map_module: exact keys (case-insensitive), `hostnames`
 * wildcards, regexes with captures and named groups, `default`, `include`,
 * `\` escapes, variables in values and in the source, forward references,
 * `volatile`. Reference: Debian's nginx 1.22 on the same configuration, and
 * nginx-tests' map.t / map_complex.t for the cases taken from them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { same, sharedPair } from './locations-kit.ts';

const conf = `
events {}
http {
    access_log off;

    map $args $x {
        default                     0;
        foo                         bar;
        foo2                        bar;
    }

    map $args $y {
        hostnames;
        default                     0;
        example.com                 foo;
        example.*                   right-wildcard;
        *.example.com               left-wildcard;
        .dot.example.com            special-wildcard;
        ~^REGEX.EXAMPLE\\.ORG$       regex-sensitive;
        ~*^www.regex.example\\.org$  regex-insensitive;
        \\include                    include;
        server                      $server_name;
        var                         $z;
    }

    map $args $z {
        default                     0;
        var                         baz;
        include                     map.conf;
    }

    map $args $c {
        ~^(?<pre>[a-z]+)-(\\d+)$     "$pre:$2";
        Foo                         CaSe;
        default                     def;
    }

    map "$arg_a:$arg_b" $complex {
        "1:2"                       one-two;
        ~^(.*):$                    "only-$1";
    }

    map $uri $cached { default $uri; }
    map $uri $uncached { volatile; default $uri; }
    map $arg_none $nodefault { x y; }

    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;

        location / { return 200 "x:$x y:$y\\n"; }
        location /z { return 200 "z:$z\\n"; }
        location /c { return 200 "c:$c pre:$pre\\n"; }
        location /complex { return 200 "complex:$complex\\n"; }
        location /nodefault { return 200 "[$nodefault]\\n"; }
        location /cache {
            set $before $cached$uncached;
            rewrite ^ /cache-after;
        }
        location /cache-after { return 200 "$before $cached $uncached\\n"; }
    }
}
`;

const pair = sharedPair({ conf, files: { 'map.conf': 'foo bar;\n' } });
const body = async (req: string) => (await same(pair(), `GET ${req} HTTP/1.1`)).body.toString();

test('map.t keys and wildcards match nginx', async () => {
  const cases: Array<[string, string]> = [
    ['/?1', 'x:0 y:0'], ['/?foo', 'x:bar y:0'], ['/?foo2', 'x:bar y:0'],
    ['/?example.com', 'x:0 y:foo'], ['/?EXAMPLE.COM', 'x:0 y:foo'], ['/?example.com.', 'x:0 y:foo'],
    ['/?example.org', 'x:0 y:right-wildcard'], ['/?foo.example.com', 'x:0 y:left-wildcard'],
    ['/?foo.example.com.', 'x:0 y:left-wildcard'], ['/?dot.example.com', 'x:0 y:special-wildcard'],
    ['/?www.dot.example.com', 'x:0 y:special-wildcard'], ['/?REGEX.EXAMPLE.ORG', 'x:0 y:regex-sensitive'],
    ['/?regex.example.org', 'x:0 y:0'], ['/?www.regex.example.org', 'x:0 y:regex-insensitive'],
    ['/?WWW.REGEX.EXAMPLE.ORG', 'x:0 y:regex-insensitive'], ['/?include', 'x:0 y:include'],
    ['/?server', 'x:0 y:localhost'], ['/?var', 'x:0 y:baz'], ['/z?foo', 'z:bar'],
  ];
  for (const [req, want] of cases) assert.equal(await body(req), `${want}\n`, req);
});

test('captures, case, complex sources and defaults match nginx', async () => {
  assert.equal(await body('/c?abc-12'), 'c:abc:12 pre:abc\n');
  assert.equal(await body('/c?FOO'), 'c:CaSe pre:\n');
  assert.equal(await body('/c?ABC-12'), 'c:def pre:\n');
  assert.equal(await body('/complex?a=1&b=2'), 'complex:one-two\n');
  assert.equal(await body('/complex?a=q'), 'complex:only-q\n');
  assert.equal(await body('/nodefault'), '[]\n');
});

test('values are cached per request unless the map is volatile', async () => {
  assert.equal(await body('/cache'), '/cache/cache /cache /cache-after\n');
});
