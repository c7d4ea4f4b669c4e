// Directives of the everyday http modules as real configurations write them
// (charset, gzip_static, expires, the fastcgi/uwsgi/scgi temp paths): where
// nginx accepts them, their values and nginx's own messages.

import type { ConfCase } from './reference.ts';

/** A configuration whose http block holds `text`. */
const http = (text: string, extra: Record<string, string> = {}): Record<string, string> => ({
  'nginx.conf': `events {}\nhttp {\n${text}\n}\n`, ...extra,
});

/** A server block's location `/` holding `text`. */
const inLocation = (text: string): Record<string, string> => http(`server {\n listen 127.0.0.1:8080;\n location / {\n${text}\n }\n}`);

export const httpModuleCases: ConfCase[] = [
  // expires reads seconds as ngx_parse_time(…, 1): years and months count, milliseconds do not
  { name: 'expires 1y', files: inLocation('expires 1y;') },
  { name: 'expires modified 1M 2w', files: inLocation('expires modified "1M 2w";') },
  { name: 'expires in milliseconds', files: inLocation('expires 500ms;') },
  { name: 'expires daily past 24 hours', files: inLocation('expires @25h;') },
  { name: 'expires daily with modified', files: inLocation('expires modified @10h;') },
  { name: 'expires in if', files: inLocation('if ($arg_a) { expires 1y; }') },

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
  { name: 'client_body_temp_path levels too long', files: http('client_body_temp_path a 5 5;') },
];
