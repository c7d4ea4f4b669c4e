// Main-context and events directives (values, duplicates, nginx's own
// messages) and what -t checks after "syntax is ok": the events section,
// worker_connections, the pid file and the log files.

import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ConfCase } from './reference.ts';

const E = 'events {}\n';
const main = (text: string): Record<string, string> => ({ 'nginx.conf': `${text}\n${E}` });

export const mainCases: ConfCase[] = [
  { name: 'no events section', files: { 'nginx.conf': 'worker_processes 1;\nhttp {\n}\n' } },
  { name: 'duplicate events', files: { 'nginx.conf': `${E}\nevents {\n    worker_connections 10;\n}\n` } },
  { name: 'duplicate http', files: { 'nginx.conf': `${E}http {\n}\nhttp {\n}\n` } },
  { name: 'duplicate events inside an include', files: { 'nginx.conf': `${E}include e.conf;\n`, 'e.conf': '\n\nevents {}\n' } },

  { name: 'worker_processes auto', files: main('worker_processes auto;') },
  { name: 'worker_processes invalid', files: main('worker_processes two;') },
  { name: 'worker_processes negative', files: main('worker_processes -1;') },
  { name: 'worker_processes duplicate', files: main('worker_processes 1;\nworker_processes 2;') },
  { name: 'worker_processes duplicate wins over an invalid value', files: main('worker_processes 1;\nworker_processes x;') },
  { name: 'daemon invalid flag', files: main('daemon maybe;') },
  { name: 'daemon flag in capitals', files: main('daemon OFF;') },
  { name: 'master_process duplicate', files: main('master_process on;\nmaster_process on;') },
  { name: 'pid duplicate', globals: '', files: main('pid a.pid;\npid b.pid;') },
  { name: 'worker_shutdown_timeout invalid', files: main('worker_shutdown_timeout 10x;') },
  { name: 'worker_shutdown_timeout with units', files: main('worker_shutdown_timeout 1h 30m 15s 500ms;') },
  { name: 'worker_shutdown_timeout units out of order', files: main('worker_shutdown_timeout 1s 1h;') },
  { name: 'worker_shutdown_timeout in years is not a msec time', files: main('worker_shutdown_timeout 1y;') },
  { name: 'timer_resolution duplicate', files: main('timer_resolution 100ms;\ntimer_resolution 1s;') },
  { name: 'worker_rlimit_nofile invalid number', files: main('worker_rlimit_nofile 10k;') },
  { name: 'worker_rlimit_core size with g', files: main('worker_rlimit_core 2g;') },
  { name: 'worker_rlimit_core invalid size', files: main('worker_rlimit_core 10q;') },
  { name: 'worker_priority invalid', files: main('worker_priority +x;') },
  { name: 'worker_priority negative', files: main('worker_priority -5;') },
  { name: 'worker_cpu_affinity invalid character', files: main('worker_cpu_affinity 0102;') },
  { name: 'worker_cpu_affinity auto with too many', files: main('worker_cpu_affinity auto 01 10;') },
  { name: 'debug_points invalid', files: main('debug_points foo;') },
  { name: 'env with and without value', files: main('env TZ;\nenv FOO=bar=baz;') },
  { name: 'user that does not exist', files: main('user nosuchuser-gh;') },
  { name: 'group that does not exist', files: main('user nobody nosuchgroup-gh;') },
  { name: 'user with its own name as group', files: main('user root;') },
  { name: 'load_module after events', files: { 'nginx.conf': `${E}load_module modules/ngx_foo_module.so;\n` } },
  { name: 'load_module after http', files: { 'nginx.conf': `http {\n}\nload_module modules/ngx_foo_module.so;\n${E}` } },
  { name: 'lock_file and working_directory accepted', files: main('lock_file nope/x.lock;\nworking_directory /nonexistent-dir;') },
  { name: 'pcre_jit flag', files: main('pcre_jit yes;') },

  { name: 'error_log unknown level', files: main('error_log error2.log foo;') },
  { name: 'error_log two levels', files: main('error_log error2.log warn error;') },
  { name: 'error_log debug mask after a level', files: main('error_log error2.log warn debug_http;') },
  { name: 'error_log level after a debug mask', files: main('error_log error2.log debug_http warn;') },
  { name: 'error_log debug masks together', files: main('error_log error2.log debug_http debug_core;') },
  { name: 'error_log stderr is not a level', files: main('error_log stderr stderr;') },
  { name: 'error_log memory buffer too small', files: main('error_log memory:1k;') },
  { name: 'error_log memory buffer large enough', files: main('error_log memory:64k debug;') },
  { name: 'error_log syslog unknown parameter', files: main('error_log syslog:foo=bar;') },
  { name: 'error_log syslog without server', files: main('error_log syslog:facility=local0;') },
  { name: 'error_log syslog unknown facility', files: main('error_log syslog:server=127.0.0.1,facility=local9;') },
  { name: 'error_log syslog bad tag', files: main('error_log syslog:server=127.0.0.1,tag=a-b;') },
  { name: 'error_log syslog duplicate severity', files: main('error_log syslog:server=127.0.0.1,severity=warn,severity=info;') },
  { name: 'error_log syslog valid', files: main('error_log syslog:server=127.0.0.1:5140,facility=local7,tag=gh,severity=info,nohostname warn;') },
  { name: 'error_log in a directory that does not exist', files: main('error_log nope/error.log;') },
  { name: 'error_log creates its file', files: main('error_log logs/other.log;\nerror_log logs/other.log;'), setup: (d) => fs.writeFileSync(path.join(d, 'logs/old.log'), '') },
  { name: 'pid in a directory that does not exist', globals: '', files: main('pid nope/nginx.pid;') },
  { name: 'pid check comes before error_log check', globals: '', files: main('pid nope/nginx.pid;\nerror_log nope/error.log;') },

  { name: 'worker_connections invalid', files: { 'nginx.conf': 'events {\n    worker_connections 10x;\n}\n' } },
  { name: 'worker_connections duplicate', files: { 'nginx.conf': 'events {\n    worker_connections 10;\n    worker_connections 20;\n}\n' } },
  {
    name: 'worker_connections too few for the listening sockets',
    files: { 'nginx.conf': 'events {\n    worker_connections 2;\n}\nhttp {\n    server { listen 127.0.0.1:8081; }\n    server { listen 127.0.0.1:8082; }\n}\n' },
  },
  { name: 'use an unknown method', files: { 'nginx.conf': 'events {\n    use kqueue;\n}\n' } },
  { name: 'use epoll', files: { 'nginx.conf': 'events {\n    use epoll;\n    multi_accept on;\n    accept_mutex off;\n    accept_mutex_delay 100ms;\n}\n' } },
  {
    name: 'debug_connection warns about low address bits and goes on',
    files: { 'nginx.conf': 'events {\n    debug_connection 127.0.0.1/24;\n    debug_connection ::1/64;\n    debug_connection 127.0.0.0/8;\n    debug_connection unix:;\n}\nfoo;\n' },
  },
  { name: '-q keeps warnings', flags: ['-t', '-q'], files: { 'nginx.conf': 'events {\n    debug_connection 127.0.0.1/24;\n}\n' } },
  { name: 'accept_mutex_delay invalid', files: { 'nginx.conf': 'events {\n    accept_mutex_delay 1M;\n}\n' } },
  { name: 'multi_accept invalid flag', files: { 'nginx.conf': 'events {\n    multi_accept sometimes;\n}\n' } },

  // http core values with nginx's own wording
  { name: 'keepalive_timeout invalid time', files: { 'nginx.conf': `${E}http {\n    keepalive_timeout abc;\n}\n` } },
  { name: 'large_client_header_buffers invalid size', files: { 'nginx.conf': `${E}http {\n    large_client_header_buffers 4 8g;\n}\n` } },
];
