// Broken (and a few valid) configurations for the reference comparison:
// the language itself — tokens, quotes, escapes, comments, blocks, includes,
// line numbers, -g, -T and -q. Directives used exist in nginx and in
// Gatehouse's core, http core and rewrite modules.

import type { ConfCase } from './reference.ts';
import { NGINX_LUA } from './reference.ts';

const E = 'events {}\n';
const long = (n: number): string => 'x'.repeat(n);

export const syntaxCases: ConfCase[] = [
  // the messages of ngx_conf_handler, in each context
  { name: 'unknown directive in main', files: { 'nginx.conf': `${E}foo bar;\n` } },
  { name: 'unknown directive in events', files: { 'nginx.conf': 'events {\n    frobnicate on;\n}\n' } },
  { name: 'unknown directive in http', files: { 'nginx.conf': `${E}http {\n    sendfilee on;\n}\n` } },
  { name: 'unknown directive in server', files: { 'nginx.conf': `${E}http {\n  server {\n    listen 127.0.0.1:8080;\n    lisen 80;\n  }\n}\n` } },
  { name: 'unknown directive in location', files: { 'nginx.conf': `${E}http {\n server {\n  location / {\n   proxy_passs http://x;\n  }\n }\n}\n` } },
  { name: 'not allowed here: listen in http', files: { 'nginx.conf': `${E}http {\n    listen 8080;\n}\n` } },
  { name: 'not allowed here: worker_processes in http', files: { 'nginx.conf': `${E}http {\n    worker_processes 2;\n}\n` } },
  { name: 'not allowed here: root in events', files: { 'nginx.conf': 'events {\n    root /tmp;\n}\n' } },
  { name: 'not allowed here: events in http', files: { 'nginx.conf': `${E}http {\n    events {}\n}\n` } },
  { name: 'not allowed here: server at main level', files: { 'nginx.conf': `${E}server {\n}\n` } },
  { name: 'not allowed here: location in http', files: { 'nginx.conf': `${E}http {\n    location / {}\n}\n` } },
  { name: 'invalid number of arguments: worker_processes', files: { 'nginx.conf': `worker_processes;\n${E}` } },
  { name: 'invalid number of arguments: root', files: { 'nginx.conf': `${E}http {\n    root a b;\n}\n` } },
  { name: 'invalid number of arguments: events with an argument', files: { 'nginx.conf': 'events x {\n}\n' } },
  { name: 'invalid number of arguments: flag with two', files: { 'nginx.conf': `daemon on off;\n${E}` } },
  { name: 'block directive without {', files: { 'nginx.conf': `${E}http;\n` } },
  { name: 'simple directive with {', files: { 'nginx.conf': `worker_processes 1 {\n}\n${E}` } },
  { name: 'unknown directive with a block', files: { 'nginx.conf': `${E}foo {\n  bar;\n}\n` } },

  // structure
  { name: 'a } too many', files: { 'nginx.conf': `${E}http {\n}\n}\n` } },
  { name: 'unclosed block at end of file', files: { 'nginx.conf': `${E}http {\n    server {\n    }\n` } },
  { name: 'directive without ; at end of file', files: { 'nginx.conf': `${E}worker_processes 1\n` } },
  { name: '; alone', files: { 'nginx.conf': `${E};\n` } },
  { name: '{ alone', files: { 'nginx.conf': `${E}{\n}\n` } },
  { name: '} after words', files: { 'nginx.conf': `${E}http {\n    root /x }\n` } },
  { name: 'empty file', files: { 'nginx.conf': '' } },
  { name: 'only comments', files: { 'nginx.conf': '# nothing here\n#\n' } },

  // quotes and escapes
  { name: 'text right after a closing quote', files: { 'nginx.conf': `${E}http {\n    root "/x"y;\n}\n` } },
  { name: 'single-quoted text then }', files: { 'nginx.conf': `${E}http { root '/x'}\n` } },
  { name: 'comment right after a closing quote', files: { 'nginx.conf': `${E}http {\n    root "/x"# c\n    ;\n}\n` } },
  { name: 'quote left open to end of file', files: { 'nginx.conf': `${E}http {\n    root "/x;\n}\n` } },
  { name: 'single quote left open', files: { 'nginx.conf': `${E}worker_processes '1;\n` } },
  { name: 'closing quote then ) starts a word', files: { 'nginx.conf': `${E}http {\n server {\n  location / {\n   return 200 "x")\n   ;\n  }\n }\n}\n` } },
  { name: 'escaped quote and semicolon stay in the word', files: { 'nginx.conf': `${E}worker_processes "\\"2";\n` } },
  { name: 'escaped ; does not end a directive', files: { 'nginx.conf': `${E}worker_processes 1\\;\n` } },
  { name: 'quote in the middle of a word is literal', files: { 'nginx.conf': `${E}worker_processes a"b;\n` } },
  { name: 'empty quoted argument', files: { 'nginx.conf': `${E}worker_processes "";\n` } },
  { name: 'quoted directive name', files: { 'nginx.conf': `${E}"worker_processes" 2;\n"frob" 1;\n` } },
  { name: 'backslash before the end of file', files: { 'nginx.conf': `${E}worker_processes 1\\` } },
  { name: 'escaped newline inside a word', files: { 'nginx.conf': `${E}worker_processes 1\\\n2;\n` } },

  // comments and ${}
  { name: 'comment between arguments and ;', files: { 'nginx.conf': `${E}worker_processes 2 # two\n;\nfoo;\n` } },
  { name: '# inside a word is not a comment', files: { 'nginx.conf': `${E}worker_processes 2#x;\n` } },
  { name: '${var} in a word does not open a block', files: { 'nginx.conf': `${E}http {\n server {\n  location / { return 200 a\${uri}b; }\n  bad;\n }\n}\n` } },
  { name: '{ after a variable name opens a block', files: { 'nginx.conf': `${E}http {\n server {\n  location / { return 200 $uri{x; }\n }\n}\n` } },

  // line endings and lengths
  { name: 'CRLF file with an error', files: { 'nginx.conf': 'events {\r\n}\r\nhttp {\r\n    server {\r\n        foo;\r\n    }\r\n}\r\n' } },
  { name: 'CRLF file is valid', files: { 'nginx.conf': 'events {\r\n}\r\nhttp {\r\n    server {\r\n        listen 127.0.0.1:8080;\r\n    }\r\n}\r\n' } },
  { name: 'no trailing newline, valid', files: { 'nginx.conf': 'events {}\nworker_processes 1;' } },
  { name: 'no trailing newline, unterminated', files: { 'nginx.conf': 'events {}\nworker_processes 1' } },
  { name: 'too long word', files: { 'nginx.conf': `${E}foo ${long(5000)};\n` } },
  { name: 'word of 4095 bytes fits', files: { 'nginx.conf': `${E}foo ${long(4095)};\n` } },
  { name: 'too long comment', files: { 'nginx.conf': `${E}# ${long(4100)}\nfoo;\n` } },
  { name: 'too long quoted word', files: { 'nginx.conf': `${E}foo "${long(4500)}";\n` } },
  { name: 'too long single-quoted word', files: { 'nginx.conf': `${E}foo '${long(4500)}';\n` } },
  { name: 'non-ASCII bytes in an unknown directive', files: { 'nginx.conf': Buffer.from('events {}\ncaf\xc3\xa9 \xff;\n', 'latin1') } },

  // a semantic error before a syntax error is reported first
  { name: 'unknown directive before a } too many', files: { 'nginx.conf': `${E}foo;\nhttp {\n}\n}\n` } },
  { name: 'unknown directive in an unclosed block', files: { 'nginx.conf': `${E}http {\n    server {\n        foo;\n` } },
  { name: 'duplicate before bad quoting', files: { 'nginx.conf': `${E}worker_processes 1;\nworker_processes 2;\nroot "a"b;\n` } },
  { name: 'syntax error before a semantic error', files: { 'nginx.conf': `${E}"a"b;\nfoo;\n` } },
  { name: 'not terminated is found before the block body is read', files: { 'nginx.conf': `${E}worker_processes 1 {\n  "a"b\n}\n` } },

  // *_by_lua_block bodies, compared with OpenResty's Lua module loaded into nginx
  { name: 'Lua block left open', nginxGlobals: NGINX_LUA, files: { 'nginx.conf': `${E}http {\ninit_by_lua_block {\n  local t = {\n  x = 1\n` } },
  { name: 'Lua long bracket left open', nginxGlobals: NGINX_LUA, files: { 'nginx.conf': `${E}http {\ninit_by_lua_block {\n  local s = [==[ abc ]]\n}\n}\n` } },
  { name: 'Lua long comment left open', nginxGlobals: NGINX_LUA, files: { 'nginx.conf': `${E}http {\ninit_by_lua_block {\n  x = 1\n  --[=[ } ]]\n}\n}\n` } },
  {
    name: 'Lua braces in strings, comments and long brackets',
    nginxGlobals: NGINX_LUA,
    needs: 'ngx_http_lua_module',
    files: { 'nginx.conf': `${E}http {\ninit_by_lua_block {\n  local s = "}" -- }\n  x = "a\n  y = [[\n}]] --[==[ { ]==]\n  z = '{' }\nfoo;\n}\n` },
  },
  { name: 'Lua block followed by ;', nginxGlobals: NGINX_LUA, needs: 'ngx_http_lua_module', files: { 'nginx.conf': `${E}http {\ninit_by_lua_block {\n  x = 1\n};\n}\n` } },

  // include
  {
    name: 'nested includes with an error in the innermost',
    files: { 'nginx.conf': `${E}http {\n    include conf.d/*.conf;\n}\n`, 'conf.d/a.conf': 'server {\n    include inner.conf;\n}\n', 'inner.conf': '# inner\n\nlisten 127.0.0.1:8080;\nbogus 1;\n' },
  },
  { name: 'include of a missing file', files: { 'nginx.conf': `${E}http {\n\n    include missing.conf;\n}\n` } },
  { name: 'include with an absolute missing path', files: { 'nginx.conf': `${E}include %%PREFIX%%/nope/x.conf;\n` } },
  { name: 'include of a glob that matches nothing', files: { 'nginx.conf': `${E}include nothing/*.conf;\ninclude none-*.conf;\n` } },
  { name: 'include glob skips hidden files and sorts', files: { 'nginx.conf': `${E}include d/*;\n`, 'd/b.conf': 'worker_processes x;\n', 'd/a.conf': 'pcre_jit on;\n', 'd/.hidden': 'junk;\n' } },
  { name: 'include ?, [] patterns', files: { 'nginx.conf': `${E}include d/[ab]?.conf;\n`, 'd/a1.conf': '#\n', 'd/b2.conf': 'foo;\n', 'd/c3.conf': 'bar;\n' } },
  { name: 'include with ..', files: { 'nginx.conf': `${E}include sub/../missing.conf;\n`, 'sub/x': '' } },
  { name: 'include a directory', files: { 'nginx.conf': `${E}include sub;\n`, 'sub/a.conf': '' } },
  { name: 'include glob matching a directory', files: { 'nginx.conf': `${E}include d/*;\n`, 'd/a.conf': '#a\n', 'd/sub/x': '' } },
  { name: 'include without an argument', files: { 'nginx.conf': `${E}include;\n` } },
  { name: 'include with a block', files: { 'nginx.conf': `${E}include a.conf {\n}\n`, 'a.conf': '' } },
  { name: 'included file closes a block it did not open', files: { 'nginx.conf': `${E}http {\n    include a.conf;\n}\n`, 'a.conf': 'server {\n}\n}\n' } },
  { name: 'included file ends inside its block', files: { 'nginx.conf': `${E}http {\n    include a.conf;\n}\n`, 'a.conf': 'server {\n' } },
  { name: 'same file included twice is fine', files: { 'nginx.conf': `${E}include a.conf;\ninclude a.conf;\n`, 'a.conf': '#\n' } },
  {
    name: 'include relative to the configuration directory, not the prefix',
    conf: 'conf/main.conf',
    files: { 'conf/main.conf': `${E}include x.conf;\n`, 'conf/x.conf': 'worker_processes two;\n', 'x.conf': '#\n' },
  },
  {
    name: 'include of a file that includes itself',
    files: { 'nginx.conf': `${E}include a.conf;\n`, 'a.conf': '\ninclude b.conf;\n', 'b.conf': 'include a.conf;\n' },
    gatehouseOnly: {
      reason: 'nginx recurses until it runs out of file descriptors or crashes (SIGSEGV here)',
      stderr: 'PROG: [emerg] recursive include of "DIR/a.conf" in DIR/b.conf:1\nPROG: configuration file DIR/nginx.conf test failed\n',
      code: 1,
    },
  },
  { name: 'missing main configuration file', conf: 'nope.conf', files: {} },

  // -g
  { name: '-g unknown directive', globals: 'pid nginx.pid; foo;', files: { 'nginx.conf': E } },
  { name: '-g block', globals: 'events {}', files: { 'nginx.conf': 'pid nginx.pid;\n' } },
  { name: '-g unterminated', globals: 'pid nginx.pid', files: { 'nginx.conf': E } },
  { name: '-g } alone', globals: 'pid nginx.pid; }', files: { 'nginx.conf': E } },
  { name: '-g then the file repeats the directive', globals: 'pid nginx.pid; worker_processes 2;', files: { 'nginx.conf': `${E}worker_processes 1;\n` } },
  { name: '-g invalid value', globals: 'pid nginx.pid; worker_processes x;', files: { 'nginx.conf': `${E}foo;\n` } },
  { name: '-g error before a missing file', globals: 'pid nginx.pid; foo;', conf: 'missing.conf', files: {} },
  { name: '-g quoting', globals: 'pid "nginx.pid"; worker_processes \'2\';', files: { 'nginx.conf': E } },

  // -t, -T, -q
  {
    name: '-T dumps each file once, in the order read',
    flags: ['-T'],
    files: { 'nginx.conf': `include inc.conf;\ninclude inc.conf;\n${E}http {\n    include d/*.conf;\n}\n`, 'inc.conf': 'include inc2.conf;', 'inc2.conf': '#inc2.conf', 'd/b.conf': '#b\r\n', 'd/a.conf': '#a\n' },
  },
  { name: '-T of a file without trailing newline', flags: ['-T'], files: { 'nginx.conf': 'events {}' } },
  { name: '-T with an error prints no dump', flags: ['-T'], files: { 'nginx.conf': `include inc.conf;\n${E}`, 'inc.conf': 'foo;\n' } },
  { name: '-t -q on success is silent', flags: ['-t', '-q'], files: { 'nginx.conf': E } },
  { name: '-tq on failure', flags: ['-tq'], files: { 'nginx.conf': `${E}foo;\n` } },
  { name: '-T -q dumps without the messages', flags: ['-T', '-q'], files: { 'nginx.conf': E } },
];

