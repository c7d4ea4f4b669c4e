// Reference test (Debian's nginx 1.22.1, /usr/sbin/nginx): the everyday http
// modules' directives (charset, gzip_static, expires, the backends' temp
// paths) in the contexts and with the values real configurations use,
// compared under -t as in reference-syntax.test.ts. Skipped without nginx.

import { compareWithNginx } from './reference.ts';
import { httpModuleCases } from './corpus-http-modules.ts';

compareWithNginx('everyday http module directives as in nginx', httpModuleCases);
