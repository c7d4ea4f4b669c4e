/**
 * ngx_http_stub_status_module: `stub_status` answers a location with
 * nginx's status page, and `$connections_active`, `_reading`, `_writing`,
 * `_waiting` give the same figures anywhere. The counters are kept by the
 * http engine in memory every worker shares (src/core/shared.ts), so the
 * figures are the whole server's, as nginx's shared-memory counters are:
 * accepted (= handled) connections, HTTP connections open, requests read,
 * connections reading a request head (plain HTTP/1 ones; not counted over
 * TLS), requests being answered; waiting is the open connections left.
 */
import { Ctx } from '../../conf/directive.ts';
import { connectionsAccepted, STAT, statValue } from '../../core/shared.ts';
import { DONE } from '../http-conf.ts';
import type { HttpModule, LocationConf, ServerConf } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { sendSimple } from '../response.ts';

function waiting(): number {
  return Math.max(0, statValue(STAT.ACTIVE) - statValue(STAT.READING) - statValue(STAT.WRITING));
}

// a body nobody reads is read and dropped by the connection after the response
async function stubStatusHandler(r: HttpRequest): Promise<number> {
  if (r.method !== 'GET' && r.method !== 'HEAD') return 405;
  const accepted = connectionsAccepted();
  const page = `Active connections: ${statValue(STAT.ACTIVE)} \n`
    + 'server accepts handled requests\n'
    + ` ${accepted} ${accepted} ${statValue(STAT.REQUESTS)} \n`
    + `Reading: ${statValue(STAT.READING)} Writing: ${statValue(STAT.WRITING)} Waiting: ${waiting()} \n`;
  await sendSimple(r, 200, page, 'text/plain');
  return DONE;
}

export const stubStatusModule: HttpModule = {
  name: 'ngx_http_stub_status_module',
  directives: [
    {
      // nginx 1.7.5 made the argument optional (`stub_status on` still reads)
      name: 'stub_status', contexts: Ctx.SERVER | Ctx.LOCATION, args: [0, 1],
      // in a server: its requests that match no location (nginx's server-level content handler)
      handler(cf) {
        const loc = (cf.data.location as LocationConf | undefined) ?? (cf.data.server as ServerConf).serverLoc;
        loc.contentHandler = stubStatusHandler;
      },
    },
  ],
  variables: [
    { name: 'connections_active', noCache: true, get: () => String(statValue(STAT.ACTIVE)) },
    { name: 'connections_reading', noCache: true, get: () => String(statValue(STAT.READING)) },
    { name: 'connections_writing', noCache: true, get: () => String(statValue(STAT.WRITING)) },
    { name: 'connections_waiting', noCache: true, get: () => String(waiting()) },
  ],
};
