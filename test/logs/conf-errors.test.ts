// Configuration of access_log, log_format, open_log_file_cache and error_log:
// what `-t` prints (and the files it creates) compared with Debian's nginx
// (reference: nginx 1.22 on the same files).

import { compareWithNginx } from '../conf/reference.ts';
import type { ConfCase } from '../conf/reference.ts';

function http(body: string, server = 'location / { return 200; }'): string {
  return `events {}\nhttp {\n${body}\n    server {\n        listen 127.0.0.1:8080;\n        ${server}\n    }\n}\n`;
}

function conf(name: string, text: string): ConfCase {
  return { name, files: { 'nginx.conf': text } };
}

compareWithNginx('log configuration', [
  conf('valid: formats, escapes, buffers, gzip, if, cache, error_log levels', http(`
    log_format a '$remote_addr "$request"' ' $status';
    log_format b escape=json '{"u":"$uri"}';
    log_format c escape=none $uri;
    log_format d escape=default '\${uri}x';
    access_log %%PREFIX%%/a.log a buffer=4k flush=1s;
    access_log %%PREFIX%%/b.log B gzip=9 if=$arg_x;
    access_log %%PREFIX%%/c.log c gzip;
    access_log %%PREFIX%%/a.log a buffer=4k flush=1s;
    open_log_file_cache max=10 inactive=20s valid=1m min_uses=2;
    error_log %%PREFIX%%/http-error.log info;`,
  `access_log %%PREFIX%%/$host.log; error_log %%PREFIX%%/srv-error.log warn; error_log %%PREFIX%%/srv-error.log debug;
        location /off { access_log off; open_log_file_cache off; error_log %%PREFIX%%/loc-error.log; }
        location /if { if ($arg_y) { access_log %%PREFIX%%/if.log; } }`)),
  conf('no access_log: the default log is opened', http('')),
  conf('access_log off everywhere: no default log', http('access_log off;')),
  conf('duplicate log_format name', http(`log_format x $uri;\n    log_format x $status;`)),
  conf('log_format combined is taken', http('log_format combined $uri;')),
  conf('log_format names differ by case', http(`log_format x $uri;\n    log_format X $status;`)),
  conf('unknown log format', http('access_log %%PREFIX%%/x.log nosuch;')),
  conf('format looked up case-insensitively, and only earlier ones', http(`access_log %%PREFIX%%/x.log later;\n    log_format later $uri;`)),
  conf('log_format with one argument', http('log_format x;')),
  conf('log_format in server', http('', 'log_format x $uri;')),
  conf('unknown escaping', http('log_format x escape=html $uri;')),
  conf('lone dollar', http(`log_format x 'a $';`)),
  conf('closing bracket missing', http(`log_format x '\${uri';`)),
  conf('empty braces', http(`log_format x '\${}';`)),
  conf('unknown variable in a format', http(`log_format x '$no_such_variable';`)),
  conf('unknown variable in if=', http('access_log %%PREFIX%%/x.log combined if=$no_such_variable;')),
  conf('buffer with variables in the path', http('access_log %%PREFIX%%/$host.log combined buffer=1k;')),
  conf('flush without buffer', http('access_log %%PREFIX%%/x.log combined flush=1s;')),
  conf('invalid buffer size', http('access_log %%PREFIX%%/x.log combined buffer=lots;')),
  conf('zero buffer size', http('access_log %%PREFIX%%/x.log combined buffer=0;')),
  conf('invalid flush time', http('access_log %%PREFIX%%/x.log combined buffer=1k flush=soon;')),
  conf('invalid compression level', http('access_log %%PREFIX%%/x.log combined gzip=10;')),
  conf('unknown access_log parameter', http('access_log %%PREFIX%%/x.log combined rotate=daily;')),
  conf('parameter in place of the format name', http('access_log %%PREFIX%%/x.log buffer=32k;')),
  conf('conflicting buffers for one file', http(`access_log %%PREFIX%%/x.log combined buffer=1k;\n    access_log %%PREFIX%%/x.log combined buffer=2k;`)),
  conf('access_log off with more arguments', http('access_log off combined;')),
  conf('access log in a missing directory', http('access_log %%PREFIX%%/no/such/dir/x.log;')),
  conf('error_log in a missing directory, location level', http('', 'location / { error_log %%PREFIX%%/no/such/dir/e.log; }')),
  conf('error_log with an invalid level', http('error_log %%PREFIX%%/e.log loud;')),
  conf('syslog destination', http('access_log syslog:server=127.0.0.1:5140,facility=local3,tag=web combined;')),
  conf('syslog cannot be buffered', http('access_log syslog:server=127.0.0.1 combined buffer=4k;')),
  conf('syslog without server', http('access_log syslog:tag=x;')),
  conf('syslog unknown parameter', http('access_log syslog:server=127.0.0.1,level=info;')),
  conf('syslog bad tag', http('access_log syslog:server=127.0.0.1,tag=a-b;')),
  conf('open_log_file_cache without max', http('open_log_file_cache inactive=10s;')),
  conf('open_log_file_cache invalid parameter', http('open_log_file_cache max=10 size=1m;')),
  conf('open_log_file_cache invalid max', http('open_log_file_cache max=ten;')),
  conf('open_log_file_cache duplicate', http('open_log_file_cache max=10;\n    open_log_file_cache off;')),
]);
