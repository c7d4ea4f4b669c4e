// Reference test (Debian's nginx 1.22.1, /usr/sbin/nginx): each configuration
// of the syntax corpus — tokens, quotes, escapes, comments, blocks, include,
// -g, -t/-T/-q — goes through nginx and Gatehouse with the same command line
// (`-p DIR/ -c nginx.conf -e error.log -t` and variations). Exit code,
// stderr, stdout, error.log and the files created must be the same after
// replacing the prefix and the program name. Skipped without nginx.

import { compareWithNginx } from './reference.ts';
import { syntaxCases } from './corpus-syntax.ts';

compareWithNginx('the configuration language reads as nginx reads it', syntaxCases);
