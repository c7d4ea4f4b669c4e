/**
 * The configuration the differential proxy tests run on both servers, and
 * the upstream responses they script. Upstream `a` and `b` are raw TCP
 * upstreams on loopback, `sock` a unix socket one, `dead` a port nobody
 * listens on; groups put them together for round robin, failover, backup and
 * keepalive.
 */
import type { Script } from './differential-kit.ts';
import { DIFF_HTTP } from './differential-kit.ts';
import { sleep } from './upstream-kit.ts';

export const conf = (a: string, b: string, dead: string, sock: string) => `
events {}
http {
${DIFF_HTTP}
    proxy_set_header X-Http-Level http;
    proxy_read_timeout 2s;
    map $http_upgrade $connection_upgrade { default upgrade; '' close; }
    upstream pool { server ${a} max_fails=0; server ${b} max_fails=0; }
    upstream failover { server ${dead} max_fails=0; server ${a} max_fails=0; }
    upstream sockgroup { server unix:${sock}; }
    upstream ka { server ${a}; keepalive 4; }
    upstream deadgroup { server ${dead}; }
    upstream withbackup { server ${dead} max_fails=0; server ${b} backup; }
    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;

        location /plain/ { proxy_pass http://${a}; }
        location /uri/ { proxy_pass http://${a}/other/; }
        location /noslash { proxy_pass http://${a}/x; }
        location ~ ^/re/(.*)$ { proxy_pass http://${a}; }
        location ~ ^/recap/(.*)$ { proxy_pass http://${a}/cap/$1$is_args$args; }
        location /rw/ { rewrite ^/rw/(.*)$ /new/$1 break; proxy_pass http://${a}; }
        location /rwuri/ { rewrite ^/rwuri/(.*)$ /new/$1 break; proxy_pass http://${a}/x/; }
        location /rwargs/ { rewrite ^/rwargs/(.*)$ /new/$1?added=1 break; proxy_pass http://${a}; }
        location /rwlast/ { rewrite ^/rwlast/(.*)$ /uri/$1 last; }
        location /var/ { set $t ${a}; proxy_pass http://$t; }
        location /varuri/ { proxy_pass http://${a}/v$uri$is_args$args; }
        location /varpool/ { set $g pool; proxy_pass http://$g; }
        location /pool/ { proxy_pass http://pool; }
        location /unix/ { proxy_pass http://unix:${sock}:/u/; }
        location /sockgroup/ { proxy_pass http://sockgroup; }

        location /hset/ {
            proxy_pass http://${a};
            proxy_set_header X-Http-Level loc;
            proxy_set_header Host $host:$server_port;
            proxy_set_header X-Empty "";
            proxy_set_header Accept "";
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Real-IP $remote_addr;
        }
        location /v11/ { proxy_pass http://${a}; proxy_http_version 1.1; }
        location /ka/ { proxy_pass http://ka; proxy_http_version 1.1; proxy_set_header Connection ""; }
        location /nohdr/ { proxy_pass http://${a}; proxy_pass_request_headers off; }
        location /nobody/ { proxy_pass http://${a}; proxy_pass_request_body off; }
        location /setbody/ { proxy_pass http://${a}; proxy_set_body "x=$arg_x"; }
        location /method/ { proxy_pass http://${a}; proxy_method PATCH; }
        location /unbuf11/ { proxy_pass http://${a}; proxy_request_buffering off; proxy_http_version 1.1; }
        location /unbuf10/ { proxy_pass http://${a}; proxy_request_buffering off; }

        location /hide/ {
            proxy_pass http://${a};
            proxy_hide_header X-Secret;
            proxy_pass_header Server;
            proxy_pass_header Date;
            proxy_pass_header X-Accel-Foo;
        }
        location /ignore/ { proxy_pass http://${a}; proxy_ignore_headers X-Accel-Redirect X-Accel-Buffering Expires Cache-Control Set-Cookie; }
        location /rd/ { proxy_pass http://${a}/up/; }
        location /rdoff/ { proxy_pass http://${a}/up/; proxy_redirect off; }
        location /rdcustom/ { proxy_pass http://${a}/up/; proxy_redirect http://$proxy_host/up/ /mapped/; }
        location /rdregex/ { proxy_pass http://${a}/up/; proxy_redirect ~^http://([^/]+)/up/(.*)$ http://$host/re-$2?h=$1; }
        location /rdvar/ { set $t ${a}; proxy_pass http://$t/up/; }
        location /icpt/ {
            proxy_pass http://${a};
            proxy_intercept_errors on;
            error_page 404 /errpage;
            error_page 500 = @named;
            error_page 503 =200 /errpage;
            error_page 502 =302 http://example.com/moved;
            error_page 418 = /plain/after418;
        }
        location /noicpt/ { proxy_pass http://${a}; error_page 404 /errpage; }
        location = /errpage { return 200 "errpage $status $uri\\n"; }
        location @named { proxy_pass http://${b}; proxy_read_timeout 200ms; }
        location /timeout/ { proxy_pass http://${a}; proxy_read_timeout 200ms; }
        location /unbuftimeout/ { proxy_pass http://${a}; proxy_read_timeout 200ms; proxy_buffering off; }
        location /bigbuf/ { proxy_pass http://${a}; proxy_buffer_size 1k; }

        location /nu/ { proxy_pass http://pool; proxy_next_upstream http_502 http_404; }
        location /nuoff/ { proxy_pass http://pool; proxy_next_upstream off; }
        location /nuni/ { proxy_pass http://pool; proxy_next_upstream error timeout http_502 non_idempotent; }
        location /nutries/ { proxy_pass http://pool; proxy_next_upstream http_502; proxy_next_upstream_tries 1; }
        location /failover/ { proxy_pass http://failover; }
        location /deadonly/ { proxy_pass http://${dead}; }

        location /unbuffered/ { proxy_pass http://${a}; proxy_buffering off; }
        location /buffered/ { proxy_pass http://${a}; }
        location /maxtemp0/ { proxy_pass http://${a}; proxy_max_temp_file_size 0; proxy_buffers 4 1k; proxy_buffer_size 1k; }

        location /nolive/ { proxy_pass http://deadgroup; }
        location /backup/ { proxy_pass http://withbackup; proxy_next_upstream error http_502; }
        location /resolve/ { set $h nosuch.invalid; proxy_pass http://$h; }
        location /hostempty/ { proxy_pass http://${a}; proxy_set_header Host ""; }
        location /srvset/ { proxy_pass http://${a}; }
        location /nutimeout/ { proxy_pass http://pool; proxy_read_timeout 200ms; proxy_next_upstream timeout; }
        location /kaclose/ { proxy_pass http://ka; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_next_upstream error; }
        location /ifloc/ {
            if ($arg_x) { proxy_pass http://${b}; }
            proxy_pass http://${a};
        }
        location /le/ { limit_except GET { deny all; } proxy_pass http://${a}; }
        location /bodyfile/ { client_body_buffer_size 8; proxy_pass http://${a}; }
        location /errdead/ { proxy_pass http://${dead}; error_page 502 /errpage; }
        location /errtimeout/ { proxy_pass http://${a}; proxy_read_timeout 200ms; error_page 504 = @named; }
        location /v11unbuf/ { proxy_pass http://${a}; proxy_http_version 1.1; proxy_buffering off; }
        location /ws/ {
            proxy_pass http://${a};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
        }
    }
}
`;

/** A response with a body and Content-Length; `X-Up` says which status it is. */
const res = (status: string, body = status.slice(0, 3), extra = '') =>
  `HTTP/1.1 ${status}\r\nX-Up: ${status.slice(0, 3)}\r\n${extra}Content-Length: ${body.length}\r\n\r\n${body}`;

/** Upstream answers by the last segment of the request path. */
export function scripts(addrOf: (name: string) => string): Record<string, Script> {
  const a = addrOf('a');
  return {
    // headers to hide, pass, ignore, rewrite
    hidden: 'HTTP/1.1 200 OK\r\nServer: up\r\nDate: Mon, 01 Jan 2001 00:00:00 GMT\r\nX-Secret: s\r\nX-Pad: p\r\nX-Accel-Foo: f\r\n'
      + 'X-Accel-Bar: b\r\nX-Accel-Expires: 5\r\nX-Up: u\r\nContent-Length: 2\r\n\r\nok',
    accelbuf: 'HTTP/1.1 200 OK\r\nX-Accel-Buffering: no\r\nExpires: Thu, 01 Jan 2037 00:00:00 GMT\r\nCache-Control: max-age=5\r\n'
      + 'Set-Cookie: a=b\r\nContent-Length: 2\r\n\r\nok',
    accelredir: 'HTTP/1.1 200 OK\r\nX-Accel-Redirect: /errpage\r\nContent-Length: 2\r\n\r\nok',
    accelargs: 'HTTP/1.1 200 OK\r\nX-Accel-Redirect: /plain/target?y=2\r\nContent-Length: 2\r\n\r\nok',
    loc: `HTTP/1.1 302 Found\r\nLocation: http://${a}/up/next?a=b\r\nRefresh: 3; url=http://${a}/up/later\r\nContent-Length: 0\r\n\r\n`,
    locrel: 'HTTP/1.1 302 Found\r\nLocation: /up/rel\r\nContent-Length: 0\r\n\r\n',
    locother: 'HTTP/1.1 301 Moved\r\nLocation: http://example.com/up/x\r\nContent-Length: 0\r\n\r\n',
    multi: 'HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nX-Up: one\r\nX-Up: two\r\nWWW-Authenticate: Basic\r\nWWW-Authenticate: Bearer\r\n'
      + 'Link: <a>\r\nLink: <b>\r\nCache-Control: no-cache\r\nCache-Control: private\r\nVary: A\r\nVary: B\r\nContent-Length: 2\r\n\r\nok',
    emptyval: 'HTTP/1.1 200 OK\r\nX-Empty:\r\nServer:\r\nContent-Type:\r\nContent-Length: 2\r\n\r\nok',
    lowercase: 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: text/x\r\nlocation: /x\r\n\r\nok',
    up8bit: 'HTTP/1.1 200 OK\r\nX-Bin: caf\xe9\r\nContent-Length: 2\r\n\r\nok',
    // statuses, for intercept_errors and retries
    s404: res('404 Not Found', 'not found'),
    s500: res('500 Oops', 'oops'),
    s503: res('503 Unavailable', 'busy'),
    s502: res('502 Bad Gateway', 'bad'),
    s418: res('418 Teapot', 'tea'),
    afail: (req, s, up) => { s.end(up === 'a' ? res('502 X') : res('200 X')); },
    a404: (req, s, up) => { s.end(up === 'a' ? res('404 X') : res('200 X')); },
    both502: (req, s) => { s.end(res('502 X')); },
    aclose: (req, s, up) => { if (up === 'a') s.end(); else s.end(res('200 X')); },
    // framings
    h10: 'HTTP/1.0 200 OK\r\n\r\nclose-delimited',
    chunked: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: t\r\n\r\n',
    range: 'HTTP/1.1 200 OK\r\nAccept-Ranges: bytes\r\nContent-Length: 10\r\n\r\n0123456789',
    headbody: 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello',
    nocontent: 'HTTP/1.1 204 No Content\r\nX-A: b\r\n\r\n',
    notmod: 'HTTP/1.1 304 Not Modified\r\nETag: "x"\r\nContent-Length: 5\r\n\r\nhello',
    // bad responses
    invalid: 'HTTP/1.1 200 OK\r\nX-Bad\x01Name: x\r\nContent-Length: 2\r\n\r\nok',
    dupcl: 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok',
    tecl: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n',
    big: `HTTP/1.1 200 OK\r\nX-Big: ${'x'.repeat(2000)}\r\nContent-Length: 2\r\n\r\nok`,
    closebefore: (req, s) => { s.end(); },
    closemid: 'HTTP/1.1 200 OK\r\nContent-Len',
    closeafter: 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc',
    closehead: 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n',
    closeheadchunked: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n',
    badchunk: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n',
    badchunklater: async (req, s) => { s.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n'); await sleep(50); s.end('zz\r\n'); },
    extra: 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA',
    hang: () => undefined,
    hanghead: (req, s) => { s.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n'); },
    hangbody: (req, s) => { s.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc'); },
    // keepalive
    ka: 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
    kathenclose: (req, s) => { s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'); setTimeout(() => s.end(), 30); },
    // pacing: the second part comes 250 ms after the first
    slow: async (req, s) => { s.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfirst'); await sleep(250); s.end('later'); },
    slowchunked: async (req, s) => {
      s.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n');
      await sleep(250);
      s.end('5\r\nlater\r\n0\r\n\r\n');
    },
    slowclose: async (req, s) => { s.write('HTTP/1.1 200 OK\r\n\r\nfirst'); await sleep(250); s.end('later'); },
    accelno: async (req, s) => { s.write('HTTP/1.1 200 OK\r\nX-Accel-Buffering: no\r\nContent-Length: 10\r\n\r\nfirst'); await sleep(250); s.end('later'); },
    large: async (req, s) => {
      s.write('HTTP/1.1 200 OK\r\nContent-Length: 20000\r\n\r\n');
      for (let i = 0; i < 20; i++) { s.write('x'.repeat(1000)); await sleep(2); }
      s.end();
    },
    // upgrade: a 101, then an echo until the client says bye
    ws: (req, s) => {
      s.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nhello');
      s.removeAllListeners('data');
      s.on('data', (b: Buffer) => { s.write(`echo:${b}`); if (String(b).includes('bye')) s.end(); });
    },
    wsrefuse: 'HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno',
  };
}
