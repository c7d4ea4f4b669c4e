// Reference test (Debian's nginx 1.22.1, /usr/sbin/nginx): main-context and
// events directives, their values and nginx's messages, and what -t checks
// after "syntax is ok" (events section, worker_connections, pid and log
// files), compared as in reference-syntax.test.ts. Skipped without nginx.

import { compareWithNginx } from './reference.ts';
import { mainCases } from './corpus-main.ts';

compareWithNginx('main-context directives and -t checks as in nginx', mainCases);
