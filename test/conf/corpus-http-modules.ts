// Directives of the everyday http modules as real configurations write them
// (charset, gzip_static, expires, the fastcgi/uwsgi/scgi temp paths): where
// nginx accepts them, their values and nginx's own messages.

import fs from 'node:fs';
import path from 'node:path';
import type { ConfCase } from './reference.ts';

/** Gatehouse's own charset maps (conf/, written by scripts/charset-maps.ts). */
const shipped = (name: string): string => fs.readFileSync(path.join(import.meta.dirname, '..', '..', 'conf', name), 'latin1');

/** A configuration whose http block holds `text`. */
const http = (text: string, extra: Record<string, string> = {}): Record<string, string> => ({
  'nginx.conf': `events {}\nhttp {\n${text}\n}\n`, ...extra,
});

/** A server block's location `/` holding `text`. */
const inLocation = (text: string): Record<string, string> => http(`server {\n listen 127.0.0.1:8080;\n location / {\n${text}\n }\n}`);

/** ngx_brotli's modules, loaded as Debian's packages install them (Gatehouse has them built in). */
const withBrotli = (text: string): Record<string, string> => ({
  'nginx.conf': `load_module /usr/lib/nginx/modules/ngx_http_brotli_filter_module.so;\nload_module /usr/lib/nginx/modules/ngx_http_brotli_static_module.so;\nevents {}\nhttp {\n${text}\n}\n`,
});

export const httpModuleCases: ConfCase[] = [
  // ngx_brotli: the directives where real configurations write them, and their checks
  { name: 'brotli everyday', files: withBrotli('brotli on; brotli_comp_level 5; brotli_types text/plain text/css application/json; brotli_min_length 256; brotli_window 512k; brotli_static on;\nserver { listen 127.0.0.1:8080; location / { brotli off; if ($arg_a) { brotli on; } } }') },
  { name: 'brotli_buffers (deprecated, accepted)', files: withBrotli('brotli_buffers 16 8k;') },
  { name: 'brotli_comp_level 12', files: withBrotli('brotli_comp_level 12;') },
  { name: 'brotli_comp_level not a number', files: withBrotli('brotli_comp_level high;') },
  { name: 'brotli_window 3k', files: withBrotli('brotli_window 3k;') },
  { name: 'brotli_window 32m', files: withBrotli('brotli_window 32m;') },
  { name: 'brotli maybe', files: withBrotli('brotli maybe;') },
  { name: 'brotli twice', files: withBrotli('brotli on;\nbrotli off;') },
  { name: 'brotli_types twice the same', files: withBrotli('brotli_types text/plain text/plain;') },
  { name: 'brotli_static sometimes', files: withBrotli('brotli_static sometimes;') },
  // gzip_comp_level's bounds are nginx's generic check (ngx_conf_check_num_bounds), its own words
  { name: 'gzip_comp_level 10', files: http('gzip_comp_level 10;') },
  { name: 'gzip_comp_level not a number', files: http('gzip_comp_level abc;') },
  { name: 'brotli_static in if', files: withBrotli('server { listen 127.0.0.1:8080; location / { if ($arg_a) { brotli_static on; } } }') },

  // expires reads seconds as ngx_parse_time(…, 1): years and months count, milliseconds do not
  { name: 'expires 1y', files: inLocation('expires 1y;') },
  { name: 'expires modified 1M 2w', files: inLocation('expires modified "1M 2w";') },
  { name: 'expires in milliseconds', files: inLocation('expires 500ms;') },
  { name: 'expires daily past 24 hours', files: inLocation('expires @25h;') },
  { name: 'expires daily with modified', files: inLocation('expires modified @10h;') },
  { name: 'expires in if', files: inLocation('if ($arg_a) { expires 1y; }') },

  // charset: where real configurations write it, and charset_map's checks
  {
    name: 'charset directives in http, server, location and if',
    files: http('charset utf-8;\ncharset_types text/css application/json;\nsource_charset utf-8;\noverride_charset off;\n'
      + 'server {\n listen 127.0.0.1:8080;\n charset off;\n location / { charset $arg_c; charset_types *; if ($arg_x) { charset koi8-r; source_charset $arg_s; override_charset on; } }\n}'),
  },
  { name: 'the shipped maps included', files: http('include /etc/nginx/koi-utf;\ninclude /etc/nginx/koi-win;\ninclude /etc/nginx/win-utf;\nserver {\n listen 127.0.0.1:8080;\n charset utf-8;\n source_charset koi8-r;\n}') },
  {
    name: "Gatehouse's shipped maps, as nginx reads them",
    files: {
      ...http('include koi-utf;\ninclude koi-win;\ninclude win-utf;\nserver {\n listen 127.0.0.1:8080;\n charset utf-8;\n source_charset windows-1251;\n}'),
      'koi-utf': shipped('koi-utf'), 'koi-win': shipped('koi-win'), 'win-utf': shipped('win-utf'),
    },
  },
  { name: 'a recode without a map', files: http('server {\n listen 127.0.0.1:8080;\n location / { charset koi8-r; source_charset windows-1251; }\n}') },
  { name: 'a recode with the map the other way', files: http('charset_map b a { 41 42; }\nserver {\n listen 127.0.0.1:8080;\n charset B;\n source_charset A;\n}') },
  { name: 'charset duplicate', files: http('charset utf-8;\ncharset koi8-r;') },
  { name: 'charset_types star then more', files: http('charset_types *;\ncharset_types text/css;') },
  { name: 'charset_types twice', files: http('charset_types text/css;\ncharset_types text/foo;') },
  { name: 'charset_types in if', files: inLocation('if ($arg_a) { charset_types text/css; }') },
  { name: 'charset_map in server', files: http('server {\n charset_map a b { 41 42; }\n}') },
  { name: 'charset_map same charsets', files: http('charset_map koi8-r KOI8-R { }') },
  {
    name: 'charset_map utf-8 first',
    files: http('charset_map utf-8 koi8-r { }'),
    gatehouseOnly: {
      reason: 'nginx refuses it since 1.31.3 ("Charset: disabled charset_map with utf-8 in the first column"); 1.22 accepted it',
      stderr: 'PROG: [emerg] "charset_map" with "utf-8" charset should be given in the second column in DIR/nginx.conf:3\n'
        + 'PROG: configuration file DIR/nginx.conf test failed\n',
      code: 1,
    },
  },
  { name: 'charset_types repeats a type', files: http('charset_types text/html text/css TEXT/CSS;') },
  { name: 'charset_map duplicate reversed', files: http('charset_map a b { }\ncharset_map b a { }') },
  { name: 'charset_map value over 255', files: http('charset_map a b { 100 41; }') },
  { name: 'charset_map bad hex', files: http('charset_map a b {\n 4G 41;\n}') },
  { name: 'charset_map with a block inside', files: http('charset_map a b {\n 41 { }\n}') },
  { name: 'charset_map three values', files: http('charset_map a b {\n 41 42 43;\n}') },
  {
    name: 'charset_map utf-8 value too long',
    files: http('charset_map a utf-8 {\n 80 E282ACAC;\n}'),
    gatehouseOnly: {
      reason: 'nginx checks the length since 1.27.5 ("Charset filter: improved validation of charset_map with utf-8"); 1.22 wrote past its table',
      stderr: 'PROG: [emerg] invalid value "E282ACAC" in DIR/nginx.conf:4\n'
        + 'PROG: configuration file DIR/nginx.conf test failed\n',
      code: 1,
    },
  },
  { name: 'charset_map utf-8 value ascii', files: http('charset_map a utf-8 {\n 80 41;\n}') },
  { name: 'charset_map utf-8 value odd', files: http('charset_map a utf-8 {\n 80 D09;\n}') },

  // gzip_static takes nginx's enum values, without case
  { name: 'gzip_static on, always, off and in capitals', files: http('gzip_static always;\nserver {\n listen 127.0.0.1:8080;\n gzip_static ON;\n location / { gzip_static off; }\n}') },
  { name: 'gzip_static invalid', files: http('gzip_static yes;') },
  { name: 'gzip_static duplicate', files: http('gzip_static on;\ngzip_static on;') },
  { name: 'gzip_static in if', files: inLocation('if ($arg_a) { gzip_static on; }') },

  // the temp paths of backends a configuration may not use at all
  {
    name: 'fastcgi, uwsgi and scgi temp paths in http, server and location',
    files: http('fastcgi_temp_path fastcgi_t 1 2;\nuwsgi_temp_path uwsgi_t;\nscgi_temp_path scgi_t 2;\n'
      + 'server {\n listen 127.0.0.1:8080;\n fastcgi_temp_path f2;\n location / { uwsgi_temp_path u2 1; scgi_temp_path s2; }\n}'),
  },
  { name: 'fastcgi_temp_path duplicate', files: http('fastcgi_temp_path a;\nfastcgi_temp_path b;') },
  { name: 'uwsgi_temp_path level zero', files: http('uwsgi_temp_path a 0;') },
  { name: 'scgi_temp_path level not a number', files: http('scgi_temp_path a x;') },
  { name: 'scgi_temp_path levels too long', files: http('scgi_temp_path a 9 9;') },
  { name: 'fastcgi_temp_path too many levels', files: http('fastcgi_temp_path a 1 1 1 1;') },
  { name: 'fastcgi_temp_path in if', files: inLocation('if ($arg_a) { fastcgi_temp_path a; }') },
  { name: 'proxy_temp_path level zero', files: http('proxy_temp_path a 1 0;') },
  // bitmask directives: a second line adds its words, a repeated word only warns
  { name: 'proxy_ignore_headers twice', files: inLocation('proxy_ignore_headers Expires;\nproxy_ignore_headers Cache-Control Expires;') },
  { name: 'proxy_next_upstream twice, a repeated word', files: inLocation('proxy_next_upstream error;\nproxy_next_upstream timeout timeout;') },
  { name: 'fastcgi_next_upstream with a word it does not know', files: inLocation('fastcgi_next_upstream error sometimes;') },
  { name: 'client_body_temp_path levels too long', files: http('client_body_temp_path a 5 5;') },
];
