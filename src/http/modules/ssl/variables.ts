/**
 * ngx_http_ssl_module's variables: the shared $ssl_* list (src/tls/variables.ts)
 * read from the request's connection.
 */
import type { HttpRequest } from '../../request.ts';
import type { HttpVariable } from '../../http-conf.ts';
import { tlsVariables } from '../../../tls/variables.ts';
import { handshakeServerName } from './handshake.ts';

export const sslVariables: HttpVariable[] = tlsVariables<HttpRequest>({
  tls: (r) => r.conn.tls,
  handshakeServerName: (r) => handshakeServerName.get(r.conn),
});
